package integration

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func TestResponseHeadersFromTheBinary(t *testing.T) {
	t.Parallel()
	svc, _ := startWithRedis(t, itConfig,
		"LIMIT_RESPONSE_HEADERS_ENABLED=true", "LIMIT_RESET_HEADER=X-RateLimit-Reset",
		"LIMIT_DRAFT_HEADERS_ENABLED=true", "LIMIT_RETRY_AFTER_HEADER_ENABLED=true")
	var last map[string]string
	for range 4 {
		resp, err := svc.call(request("it", desc("global", "h"), desc("generic_key", "fixed")))
		if err != nil {
			t.Fatal(err)
		}
		last = map[string]string{}
		for _, h := range resp.GetResponseHeadersToAdd() {
			last[h.GetKey()] = h.GetValue()
		}
	}
	// The fourth call is over fixed3's 3/day: it describes that rule.
	for key, want := range map[string]string{
		"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Policy": `"fixed3";q=3;w=86400`,
	} {
		if last[key] != want {
			t.Errorf("%s = %q, want %q (all %v)", key, last[key], want, last)
		}
	}
	for _, key := range []string{"X-RateLimit-Reset", "RateLimit", "Retry-After"} {
		if last[key] == "" {
			t.Errorf("%s missing (all %v)", key, last)
		}
	}
}

// TestRequestAndAllLimitsHeadersFromTheBinary: LIMIT_REQUEST_HEADERS_ENABLED
// (with its own names) fills request_headers_to_add from the same
// descriptor as the response headers, and LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED
// adds a pair per counted limit, under SHADOW_MODE too (a rollout where the
// backend sees its quota while Envoy admits everything).
func TestRequestAndAllLimitsHeadersFromTheBinary(t *testing.T) {
	t.Parallel()
	svc, _ := startWithRedis(t, itConfig, "SHADOW_MODE=true",
		"LIMIT_RESPONSE_HEADERS_ENABLED=true", "LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED=true",
		"LIMIT_REQUEST_HEADERS_ENABLED=true", "LIMIT_REQUEST_REMAINING_HEADER=X-Upstream-Remaining")
	var resp *rlsv3.RateLimitResponse
	for range 4 {
		var err error
		if resp, err = svc.call(request("it", desc("generic_key", "shared"), desc("generic_key", "fixed"))); err != nil {
			t.Fatal(err)
		}
	}
	if resp.GetOverallCode() != ok {
		t.Fatalf("SHADOW_MODE answered %v", resp.GetOverallCode())
	}
	pairs := func(hs []*corev3.HeaderValue) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.GetKey()+"="+h.GetValue())
		}
		return out
	}
	// The fourth call is past fixed3's 3/day (counted, but not denied).
	reset := ""
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == "RateLimit-Reset" {
			reset = h.GetValue()
		}
	}
	wantResponse := []string{"ratelimit-limit-days=100", "ratelimit-remaining-days=96", "ratelimit-limit-days=3", "ratelimit-remaining-days=0",
		"RateLimit-Limit=3", "RateLimit-Remaining=0", "RateLimit-Reset=" + reset}
	if got := pairs(resp.GetResponseHeadersToAdd()); !slices.Equal(got, wantResponse) || reset == "" {
		t.Errorf("response headers %v, want %v", got, wantResponse)
	}
	wantRequest := []string{"RateLimit-Limit=3", "X-Upstream-Remaining=0", "RateLimit-Reset=" + reset}
	if got := pairs(resp.GetRequestHeadersToAdd()); !slices.Equal(got, wantRequest) {
		t.Errorf("request headers %v, want %v", got, wantRequest)
	}
}
