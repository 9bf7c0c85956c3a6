package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
