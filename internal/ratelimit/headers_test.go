package ratelimit_test

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const headersConfig = `
domain: h
descriptors:
  - key: wide
    rate_limit: {unit: minute, requests_per_unit: 100, name: wide}
  - key: narrow
    rate_limit: {unit: minute, requests_per_unit: 3, name: narrow}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: minute1
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: hour1
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: quota_minute
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota_hour
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`

func headerMap(resp *rlsv3.RateLimitResponse) map[string]string {
	out := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		out[h.GetKey()] = h.GetValue()
	}
	return out
}

// allHeaders turns every kind of header on.
var allHeaders = ratelimit.Headers{Classic: true, Draft: true, RetryAfter: true}

var responseHeaderTests = []struct {
	name    string
	headers ratelimit.Headers
	advance time.Duration
	calls   int // identical calls before the one checked
	req     *rlsv3.RateLimitRequest
	want    map[string]string
}{{
	name:    "off by default",
	headers: ratelimit.Headers{},
	req:     request("h", desc("narrow", "")),
	want:    map[string]string{},
}, {
	name:    "the descriptor with the least remaining, envoyproxy names",
	headers: ratelimit.Headers{Classic: true},
	advance: 15 * time.Second,
	req:     request("h", desc("wide", ""), desc("narrow", ""), desc("free", "")),
	want:    map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "45"},
}, {
	name:    "custom names",
	headers: ratelimit.Headers{Classic: true, Limit: "X-Limit", Remaining: "X-Left", Reset: "X-Reset"},
	req:     request("h", desc("wide", "")),
	want:    map[string]string{"X-Limit": "100", "X-Left": "99", "X-Reset": "60"},
}, {
	name:    "over the limit: draft fields and Retry-After",
	headers: allHeaders,
	advance: 50 * time.Second,
	calls:   3,
	req:     request("h", desc("wide", ""), desc("narrow", "")),
	want: map[string]string{
		"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "10",
		"RateLimit-Policy": `"narrow";q=3;w=60`, "RateLimit": `"narrow";r=0;t=10`, "Retry-After": "10",
	},
}, {
	name:    "a descriptor over its limit wins over a shadow one reported first",
	headers: ratelimit.Headers{Classic: true, Draft: true},
	advance: 30 * time.Second,
	calls:   3,
	req:     request("h", desc("shadow", ""), desc("narrow", "")),
	want: map[string]string{
		"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "30",
		"RateLimit-Policy": `"narrow";q=3;w=60`, "RateLimit": `"narrow";r=0;t=30`,
	},
}, {
	name:    "a shadow rule at zero is the least remaining while nothing is over",
	headers: ratelimit.Headers{Classic: true, Draft: true},
	req:     request("h", desc("wide", ""), desc("shadow", "")),
	want: map[string]string{
		"RateLimit-Limit": "0", "RateLimit-Remaining": "0", "RateLimit-Reset": "3600",
		"RateLimit-Policy": `"h.shadow";q=0;w=3600`, "RateLimit": `"h.shadow";r=0;t=3600`,
	},
}, {
	name:    "a bucket's Retry-After is when a token exists, not when it is full",
	headers: ratelimit.Headers{RetryAfter: true},
	calls:   4,
	req:     request("h", desc("bucket", "")),
	want:    map[string]string{"Retry-After": "1"},
}, {
	name:    "Retry-After waits for every spent rule, not just the one described",
	headers: ratelimit.Headers{Classic: true, RetryAfter: true},
	advance: 15 * time.Second,
	calls:   1,
	req:     request("h", desc("hour1", ""), desc("minute1", "")),
	want: map[string]string{
		"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "45", "Retry-After": "3585",
	},
}, {
	name:    "Retry-After of spent quota rules is the first to have room",
	headers: ratelimit.Headers{RetryAfter: true},
	advance: 15 * time.Second,
	calls:   1,
	req:     request("h", desc("quota_hour", ""), desc("quota_minute", "")),
	want:    map[string]string{"Retry-After": "45"},
}, {
	name:    "and no earlier than the enforced rules allow",
	headers: ratelimit.Headers{RetryAfter: true},
	advance: 15 * time.Second,
	calls:   1,
	req:     request("h", desc("quota_hour", ""), desc("quota_minute", ""), desc("hour1", "")),
	want:    map[string]string{"Retry-After": "3585"},
}, {
	name:    "no Retry-After when allowed",
	headers: ratelimit.Headers{RetryAfter: true},
	req:     request("h", desc("narrow", "")),
	want:    map[string]string{},
}, {
	name:    "nothing counted: no headers",
	headers: allHeaders,
	req:     request("h", desc("free", ""), desc("unknown", "")),
	want:    map[string]string{},
}}

func TestResponseHeaders(t *testing.T) {
	for _, tt := range responseHeaderTests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, headersConfig, ratelimit.WithHeaders(tt.headers))
			f.clock.Advance(tt.advance)
			for range tt.calls {
				f.call(t, tt.req)
			}
			got := headerMap(f.call(t, tt.req))
			if len(got) != len(tt.want) {
				t.Fatalf("headers %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}
