package integration

import (
	"net/http"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// regexConfig ranks a value_regex against an exact value, a wildcard and
// the key alone; each rule's name says which one answered.
const regexConfig = `domain: rx
descriptors:
  - key: path
    value_regex: '/api/v[0-9]+/.*'
    rate_limit: {unit: day, requests_per_unit: 2, name: regex}
  - key: path
    value: /api/v1/health
    rate_limit: {unit: day, requests_per_unit: 100, name: exact}
  - key: path
    value: /api/v2/*
    rate_limit: {unit: day, requests_per_unit: 100, name: wildcard}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 100, name: key}
  - key: tenant
    value_regex: 'acme-(eu|us)'
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 3, name: tenants}
`

func TestValueRegexRanking(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{memoryBackend, redisBackend} {
		t.Run(be.name, func(t *testing.T) {
			svc, _ := startOn(t, be, regexConfig)
			ruleOf := func(key, value string) (string, rlsv3.RateLimitResponse_Code) {
				t.Helper()
				resp, err := svc.call(request("rx", desc(key, value)))
				if err != nil {
					t.Fatal(err)
				}
				return resp.GetStatuses()[0].GetCurrentLimit().GetName(), resp.GetOverallCode()
			}
			for _, tc := range []struct{ value, want string }{
				{"/api/v1/health", "exact"},     // exact beats the regex listed before it
				{"/api/v2/users", "wildcard"},   // a wildcard beats it too
				{"/api/v3/users", "regex"},      // the regex beats the key alone
				{"/api/vX/users", "key"},        // no match: the key alone
				{"/v1/api/v3/users", "key"},     // the whole value must match
				{"/api/v3/users/../x", "regex"}, // '.*' takes the rest
			} {
				if got, _ := ruleOf("path", tc.value); got != tc.want {
					t.Errorf("path %q: rule %q, want %q", tc.value, got, tc.want)
				}
			}
			// The regex counts each value apart: /api/v3/users has had 1 hit.
			var codes []rlsv3.RateLimitResponse_Code
			for _, v := range []string{"/api/v3/users", "/api/v3/users", "/api/v4/x"} {
				_, code := ruleOf("path", v)
				codes = append(codes, code)
			}
			if !equal(codes, []rlsv3.RateLimitResponse_Code{ok, over, ok}) {
				t.Errorf("regex counters %v, want [OK OVER_LIMIT OK]", codes)
			}
			// share_threshold: every matching value shares one counter.
			codes = codes[:0]
			for _, v := range []string{"acme-eu", "acme-us", "acme-eu", "acme-us"} {
				_, code := ruleOf("tenant", v)
				codes = append(codes, code)
			}
			if !equal(codes, []rlsv3.RateLimitResponse_Code{ok, ok, ok, over}) {
				t.Errorf("shared regex counter %v, want [OK OK OK OVER_LIMIT]", codes)
			}
			if got, _ := ruleOf("tenant", "acme-asia"); got != "" {
				t.Errorf("acme-asia matched %q, want no rule", got)
			}
			status, body := get(t, "http://"+svc.debugAddr+"/rlconfig")
			if status != http.StatusOK || !strings.Contains(body, "rx.path=~/api/v[0-9]+/.*: unit=DAY requests_per_unit=2") {
				t.Errorf("/rlconfig %d lacks the regex rule:\n%s", status, body)
			}
		})
	}
}
