package integration

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// startWithRedis runs one ratelimitd on a fresh redis-server with the
// envoyproxy environment settings an existing deployment would have.
func startWithRedis(t *testing.T, config string, env ...string) (*service, *redistest.Server) {
	t.Helper()
	rds := redistest.Start(t)
	return startWithRedisAt(t, rds.Addr, config, env...), rds
}

// startWithRedisAt is startWithRedis against a Redis the test started.
func startWithRedisAt(t *testing.T, addr, config string, env ...string) *service {
	t.Helper()
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": config})
	base := append(redisEnv(addr), "REDIS_POOL_SIZE=8", "REDIS_TIMEOUT=2s", "USE_STATSD=false", "LOG_FORMAT=json")
	return startService(t, root, append(base, env...)...)
}

func TestShouldRateLimitSemantics(t *testing.T) {
	svc, _ := startWithRedis(t, itConfig)

	for _, sub := range []struct {
		name string
		run  func(*testing.T, *service)
	}{
		{"fixed window counts down and reports envoyproxy's reset", fixedWindowCountsDown},
		{"token bucket admits its burst then refuses", tokenBucketBurst},
		{"denied request consumes nothing from the other descriptors", denialConsumesNothing},
		{"keys are injective", keysAreInjective},
		{"unknown domain and unmatched descriptors are OK without a limit", unknownDomainIsOK},
		{"unlimited, zero and shadow", unlimitedZeroShadow},
		{"wildcard nested match at full depth", wildcardNestedMatch},
		{"replaces drops the replaced rule", replacesDropsRule},
		{"hits_addend: request level, descriptor level and check only", hitsAddendLevels},
		{"request limit override is honoured", limitOverrideHonoured},
		{"invalid requests are INVALID_ARGUMENT", invalidRequests},
		{"HTTP healthcheck and json", httpHealthAndJSON},
	} {
		t.Run(sub.name, func(t *testing.T) { sub.run(t, svc) })
	}
}

func fixedWindowCountsDown(t *testing.T, svc *service) {
	for i, want := range []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{{ok, 2}, {ok, 1}, {ok, 0}, {over, 0}} {
		resp, err := svc.call(request("it", desc("generic_key", "fixed")))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != want.code || st.GetCode() != want.code || st.GetLimitRemaining() != want.remaining {
			t.Fatalf("call %d: overall %v status %v remaining %d, want %v/%d", i, resp.GetOverallCode(), st.GetCode(), st.GetLimitRemaining(), want.code, want.remaining)
		}
		lim := st.GetCurrentLimit()
		if lim.GetRequestsPerUnit() != 3 || lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || lim.GetName() != "fixed3" {
			t.Fatalf("current_limit = %v", lim)
		}
		// Whole seconds until the next UTC midnight, as envoyproxy computes it.
		now := time.Now().Unix()
		reset := st.GetDurationUntilReset().AsDuration()
		if want := 86400 - now%86400; reset != time.Duration(want)*time.Second && reset != time.Duration(want-1)*time.Second && reset != time.Duration(want+1)*time.Second {
			t.Fatalf("duration_until_reset %s, want about %ds", reset, want)
		}
	}
}

func tokenBucketBurst(t *testing.T, svc *service) {
	var got []rlsv3.RateLimitResponse_Code
	for range 5 {
		resp, err := svc.call(request("it", desc("generic_key", "bucket")))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode())
	}
	want := []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, over}
	if !equal(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
}

func denialConsumesNothing(t *testing.T, svc *service) {
	resp, err := svc.call(request("it", desc("generic_key", "shared"), desc("generic_key", "zero")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOverallCode() != over || !equal(statusCodes(resp), []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("got %v %v", resp.GetOverallCode(), statusCodes(resp))
	}
	resp, err = svc.call(request("it", desc("generic_key", "shared")))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetStatuses()[0].GetLimitRemaining(); r != 99 {
		t.Fatalf("remaining after one admitted hit = %d, want 99 (the denied request must not count)", r)
	}
}

func keysAreInjective(t *testing.T, svc *service) {
	for _, d := range []*rlcommon.RateLimitDescriptor{desc("a", "b_c"), desc("a_b", "c")} {
		resp, err := svc.call(request("it", d))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != ok {
			t.Fatalf("%v: %v; (a,b_c) and (a_b,c) must not share a counter", d, resp.GetOverallCode())
		}
	}
}

func unknownDomainIsOK(t *testing.T, svc *service) {
	for _, r := range []*rlsv3.RateLimitRequest{
		request("nope", desc("generic_key", "fixed")),
		request("it", desc("no_such_key", "x")),
		request("it", desc("path", "/api/v1/items")), // matches a node that has no limit at depth 1
	} {
		resp, err := svc.call(r)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Fatalf("%v: got %v", r, resp)
		}
	}
}

func unlimitedZeroShadow(t *testing.T, svc *service) {
	resp, err := svc.call(request("it", desc("generic_key", "unlimited")))
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetStatuses()[0]; st.GetCode() != ok || st.GetLimitRemaining() != math.MaxUint32 {
		t.Fatalf("unlimited: %v", st)
	}
	resp, err = svc.call(request("it", desc("generic_key", "zero")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOverallCode() != over {
		t.Fatalf("requests_per_unit 0: %v", resp.GetOverallCode())
	}
	for i := range 3 {
		resp, err = svc.call(request("it", desc("generic_key", "shadow")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != ok {
			t.Fatalf("shadow call %d: %v", i, resp.GetOverallCode())
		}
	}
}

func wildcardNestedMatch(t *testing.T, svc *service) {
	var got []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := svc.call(request("it", desc("path", "/api/v2/items", "method", "GET")))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode())
	}
	if !equal(got, []rlsv3.RateLimitResponse_Code{ok, ok, over}) {
		t.Fatalf("GET: %v", got)
	}
	// Key-only fallback at depth 2.
	got = nil
	for range 2 {
		resp, err := svc.call(request("it", desc("path", "/api/v2/items", "method", "POST")))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode())
	}
	if !equal(got, []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("POST: %v", got)
	}
}

func replacesDropsRule(t *testing.T, svc *service) {
	for i := range 3 {
		resp, err := svc.call(request("it", desc("remote_address", "10.0.0.1"), desc("user", "vip-7")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != ok {
			t.Fatalf("call %d: per_ip (1/day) must be replaced by vip: %v", i, statusCodes(resp))
		}
		if st := resp.GetStatuses()[0]; st.GetCurrentLimit() != nil {
			t.Fatalf("replaced descriptor must be a bare OK, got %v", st)
		}
	}
}

func hitsAddendLevels(t *testing.T, svc *service) {
	r := request("it", desc("generic_key", "hits"))
	r.HitsAddend = 4
	resp, err := svc.call(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 6 {
		t.Fatalf("after 4 hits remaining %d, want 6", got)
	}
	resp, err = svc.call(request("it", withHits(desc("generic_key", "hits"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 6 {
		t.Fatalf("check only changed remaining to %d", got)
	}
	r = request("it", withHits(desc("generic_key", "hits"), 6))
	r.HitsAddend = 100 // the descriptor's own addend wins
	resp, err = svc.call(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 0 {
		t.Fatalf("descriptor hits 6: %v", resp)
	}
}

func limitOverrideHonoured(t *testing.T, svc *service) {
	d := desc("generic_key", "unlimited")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 4 /* DAY */}
	var got []rlsv3.RateLimitResponse_Code
	for range 2 {
		resp, err := svc.call(request("it", d))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode())
	}
	if !equal(got, []rlsv3.RateLimitResponse_Code{ok, over}) {
		t.Fatalf("override 1/day: %v", got)
	}
}

func invalidRequests(t *testing.T, svc *service) {
	long := strings.Repeat("x", 1<<20)
	for name, r := range map[string]*rlsv3.RateLimitRequest{
		"empty domain":   request("", desc("k", "v")),
		"no descriptors": request("it"),
		"empty key":      request("it", desc("", "v")),
		"huge value":     request("it", desc("k", long)),
	} {
		_, err := svc.call(r)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	var many []*rlcommon.RateLimitDescriptor
	for range 10000 {
		many = append(many, desc("k", "v"))
	}
	if _, err := svc.call(request("it", many...)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("10000 descriptors: %v", err)
	}
}

func httpHealthAndJSON(t *testing.T, svc *service) {
	resp, err := http.Get("http://" + svc.httpAddr + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthcheck %d", resp.StatusCode)
	}
	body := `{"domain":"it","descriptors":[{"entries":[{"key":"generic_key","value":"shadow"}]},{"entries":[{"key":"remote_address","value":"10.9.9.9"}]}]}`
	var statuses []int
	for range 2 {
		resp, err := http.Post("http://"+svc.httpAddr+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var decoded map[string]any
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatalf("json body %q: %v", raw, err)
		}
		if _, has := decoded["overallCode"]; !has {
			t.Fatalf("json body lacks overallCode: %s", raw)
		}
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != http.StatusOK || statuses[1] != http.StatusTooManyRequests {
		t.Fatalf("/json statuses %v, want [200 429]", statuses)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
