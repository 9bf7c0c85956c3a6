package integration

import (
	"testing"
)

func TestResponseHeadersFromTheBinary(t *testing.T) {
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
