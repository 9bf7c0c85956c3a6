package integration

import (
	"math"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

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
	t.Parallel()
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
