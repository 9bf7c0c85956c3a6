package ratelimit_test

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
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

// pairs lists headers as key=value in order, so tests see duplicates and
// order (envoyproxy's all-descriptor headers repeat a unit's name).
func pairs(hs []*corev3.HeaderValue) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.GetKey()+"="+h.GetValue())
	}
	return out
}

func TestRequestHeaders(t *testing.T) {
	for _, tt := range []struct {
		name          string
		headers       ratelimit.Headers
		calls         int
		req           *rlsv3.RateLimitRequest
		wantRequest   []string
		wantResponse  []string
		wantOverLimit bool
	}{{
		name:        "upstream only, envoyproxy's default names, from the least remaining",
		headers:     ratelimit.Headers{Request: true},
		req:         request("h", desc("wide", ""), desc("narrow", "")),
		wantRequest: []string{"RateLimit-Limit=3", "RateLimit-Remaining=2", "RateLimit-Reset=45"},
	}, {
		name:         "own names beside the response headers, the same descriptor",
		headers:      ratelimit.Headers{Classic: true, Request: true, RequestLimit: "X-Up-Limit", RequestRemaining: "X-Up-Left", RequestReset: "X-Up-Reset"},
		req:          request("h", desc("wide", ""), desc("narrow", "")),
		wantRequest:  []string{"X-Up-Limit=3", "X-Up-Left=2", "X-Up-Reset=45"},
		wantResponse: []string{"RateLimit-Limit=3", "RateLimit-Remaining=2", "RateLimit-Reset=45"},
	}, {
		name:        "a shadow-mode rollout: over its limit, answered OK, the backend told",
		headers:     ratelimit.Headers{Request: true},
		calls:       2,
		req:         request("h", desc("shadow", "")),
		wantRequest: []string{"RateLimit-Limit=0", "RateLimit-Remaining=0", "RateLimit-Reset=3585"},
	}, {
		name:          "denied: still filled (Envoy forwards nothing then)",
		headers:       ratelimit.Headers{Request: true},
		calls:         3,
		req:           request("h", desc("narrow", "")),
		wantRequest:   []string{"RateLimit-Limit=3", "RateLimit-Remaining=0", "RateLimit-Reset=45"},
		wantOverLimit: true,
	}, {
		name:    "nothing counted: none",
		headers: ratelimit.Headers{Request: true},
		req:     request("h", desc("free", ""), desc("unknown", "")),
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, headersConfig, ratelimit.WithHeaders(tt.headers))
			f.clock.Advance(15 * time.Second)
			for range tt.calls {
				f.call(t, tt.req)
			}
			resp := f.call(t, tt.req)
			if got := pairs(resp.GetRequestHeadersToAdd()); !slices.Equal(got, tt.wantRequest) {
				t.Errorf("request headers %v, want %v", got, tt.wantRequest)
			}
			if got := pairs(resp.GetResponseHeadersToAdd()); !slices.Equal(got, tt.wantResponse) {
				t.Errorf("response headers %v, want %v", got, tt.wantResponse)
			}
			if over := resp.GetOverallCode() == OVER; over != tt.wantOverLimit {
				t.Errorf("overall %v, want over limit %v", resp.GetOverallCode(), tt.wantOverLimit)
			}
		})
	}
}

const allLimitsConfig = `
domain: a
descriptors:
  - key: minute
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: other_minute
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {unit: day, requests_per_unit: 1000}
  - key: free
    rate_limit: {unlimited: true}
`

func TestAllLimitsHeaders(t *testing.T) {
	f := newFixture(t, allLimitsConfig, ratelimit.WithHeaders(ratelimit.Headers{AllLimits: true, Classic: true}))
	req := request("a", desc("hour", ""), desc("free", ""), desc("minute", ""), desc("other_minute", ""), desc("both", ""), desc("unknown", ""))
	f.call(t, req)
	resp := f.call(t, req)
	want := []string{
		// Every counted limit in request order, a unit's name repeated as
		// envoyproxy repeats it; then the classic headers of the least.
		"ratelimit-limit-hours=100", "ratelimit-remaining-hours=98",
		"ratelimit-limit-minutes=5", "ratelimit-remaining-minutes=3",
		"ratelimit-limit-minutes=7", "ratelimit-remaining-minutes=5",
		"ratelimit-limit-seconds=10", "ratelimit-remaining-seconds=8",
		"ratelimit-limit-days=1000", "ratelimit-remaining-days=998",
		"RateLimit-Limit=5", "RateLimit-Remaining=3", "RateLimit-Reset=60",
	}
	if got := pairs(resp.GetResponseHeadersToAdd()); !slices.Equal(got, want) {
		t.Errorf("headers\n got %v\nwant %v", got, want)
	}
	if hs := f.call(t, request("a", desc("free", ""))).GetResponseHeadersToAdd(); len(hs) != 0 {
		t.Errorf("nothing counted: headers %v, want none", pairs(hs))
	}
}
