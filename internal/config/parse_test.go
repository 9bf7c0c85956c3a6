package config

import (
	"reflect"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func parseOne(t *testing.T, yaml string, opts ...Option) *Config {
	t.Helper()
	c, err := Parse([]File{{Name: "f.yaml", Data: []byte(yaml)}}, opts...)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// withoutPath drops the fields a table cannot spell out.
func withoutPath(r *Rule) Rule {
	c := *r
	c.path = nil
	c.key = keyParts{} // derived from Domain and Limit, compared there
	c.Source = ""
	c.limits = nil // compared by TestParseRateLimits
	c.slot = nil   // an observer's, not the config's
	return c
}

func fixed(requests uint64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: requests, Period: period}
}

const (
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
)

var parseGoodTests = []struct {
	name    string
	yaml    string
	entries []Entry
	want    Rule
}{
	{
		name: "fixed window by default",
		yaml: `
domain: d
descriptors:
  - key: k
    value: v
    rate_limit:
      unit: minute
      requests_per_unit: 10
`,
		entries: []Entry{{"k", "v"}},
		want: Rule{Domain: "d", StatKey: "d.k_v", Unit: minute, RequestsPerUnit: 10,
			Limit: fixed(10, time.Minute)},
	},
	{
		name: "unit is case-insensitive",
		yaml: `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: HoUr, requests_per_unit: 3}
`,
		entries: []Entry{{"k", "anything"}},
		want:    Rule{Domain: "d", StatKey: "d.k", Unit: hour, RequestsPerUnit: 3, Limit: fixed(3, time.Hour)},
	},
	{
		name: "zero requests denies everything but loads",
		yaml: `
domain: d
descriptors:
  - key: ip
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`,
		entries: []Entry{{"ip", "50.0.0.5"}},
		want:    Rule{Domain: "d", StatKey: "d.ip_50.0.0.5", Unit: second, Limit: fixed(0, time.Second)},
	},
	{
		name: "unlimited has no unit and no store limit",
		yaml: `
domain: d
descriptors:
  - key: k
    rate_limit:
      unlimited: true
`,
		entries: []Entry{{"k", "v"}},
		want:    Rule{Domain: "d", StatKey: "d.k", Unlimited: true},
	},
	{
		name: "descriptor flags and metadata",
		yaml: `
domain: d
descriptors:
  - key: k
    value: v*
    shadow_mode: true
    detailed_metric: true
    value_to_metric: true
    share_threshold: true
    quota_mode: true
    metadata:
      backend: gpt-5
      weight: 3
      tags: [a, b]
      nested: {on: true, none: null}
    rate_limit: {unit: second, requests_per_unit: 1}
`,
		entries: []Entry{{"k", "v1"}},
		want: Rule{Domain: "d", StatKey: "d.k_v*", Unit: second, RequestsPerUnit: 1, Limit: fixed(1, time.Second),
			ShadowMode: true, DetailedMetric: true, ValueToMetric: true, ShareThreshold: true, QuotaMode: true,
			Metadata: map[string]any{"backend": "gpt-5", "weight": float64(3), "tags": []any{"a", "b"},
				"nested": map[string]any{"on": true, "none": nil}}},
	},
	{
		name: "name and replaces",
		yaml: `
domain: d
descriptors:
  - key: k
    rate_limit:
      name: specific
      replaces: [{name: general}, {name: other}]
      unit: second
      requests_per_unit: 5
`,
		entries: []Entry{{"k", "v"}},
		want: Rule{Domain: "d", StatKey: "d.k", Name: "specific", Replaces: []string{"general", "other"},
			Unit: second, RequestsPerUnit: 5, Limit: fixed(5, time.Second)},
	},
	{
		name: "token bucket extensions",
		yaml: `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 10
      algorithm: Token_Bucket
      burst: 50
      refill_interval: 100ms
      max_debt: 5
`,
		entries: []Entry{{"k", "v"}},
		want: Rule{Domain: "d", StatKey: "d.k", Unit: second, RequestsPerUnit: 10,
			Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second,
				Burst: 50, RefillInterval: 100 * time.Millisecond, MaxDebt: 5}},
	},
	{
		name: "unit_multiplier makes custom windows",
		yaml: `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 7, algorithm: sliding_log}
`,
		entries: []Entry{{"k", "v"}},
		want: Rule{Domain: "d", StatKey: "d.k", Unit: minute, RequestsPerUnit: 7,
			Limit: algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 7, Period: 5 * time.Minute}},
	},
	{
		name: "numbers and YAML 1.1 booleans as yaml.v2 reads them",
		yaml: `
domain: 42
descriptors:
  - key: port
    value: 8080
    shadow_mode: yes
    rate_limit: {unit: second, requests_per_unit: 0x10}
`,
		entries: []Entry{{"port", "8080"}},
		want: Rule{Domain: "42", StatKey: "42.port_8080", Unit: second, RequestsPerUnit: 16,
			Limit: fixed(16, time.Second), ShadowMode: true},
	},
	{
		name: "nested stat key",
		yaml: `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
`,
		entries: []Entry{{"message_type", "marketing"}, {"to_number", "2061111111"}},
		want: Rule{Domain: "messaging", StatKey: "messaging.message_type_marketing.to_number",
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY, RequestsPerUnit: 5, Limit: fixed(5, 24*time.Hour)},
	},
	{
		name: "anchors and merge keys",
		yaml: `
domain: d
descriptors:
  - key: base
    rate_limit: &base
      unit: minute
      requests_per_unit: 9
  - key: k
    rate_limit:
      <<: *base
      requests_per_unit: 4
`,
		entries: []Entry{{"k", "v"}},
		want:    Rule{Domain: "d", StatKey: "d.k", Unit: minute, RequestsPerUnit: 4, Limit: fixed(4, time.Minute)},
	},
}

func TestParseGood(t *testing.T) {
	for _, tt := range parseGoodTests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseOne(t, tt.yaml)
			got := c.Match(tt.want.Domain, tt.entries)
			if got == nil {
				t.Fatalf("Match(%v) = nil\n%s", tt.entries, c.Dump())
			}
			if !reflect.DeepEqual(withoutPath(got), tt.want) {
				t.Errorf("rule:\n got %+v\nwant %+v", withoutPath(got), tt.want)
			}
		})
	}
}

func TestParseUnits(t *testing.T) {
	tests := []struct {
		unit string
		enum rlsv3.RateLimitResponse_RateLimit_Unit
		want time.Duration
	}{
		{"second", second, time.Second},
		{"minute", minute, time.Minute},
		{"hour", hour, time.Hour},
		{"day", rlsv3.RateLimitResponse_RateLimit_DAY, 86400 * time.Second},
		{"week", rlsv3.RateLimitResponse_RateLimit_WEEK, 604800 * time.Second},
		{"month", rlsv3.RateLimitResponse_RateLimit_MONTH, 2592000 * time.Second},
		{"YEAR", rlsv3.RateLimitResponse_RateLimit_YEAR, 31536000 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.unit, func(t *testing.T) {
			c := parseOne(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: "+tt.unit+", requests_per_unit: 1}\n")
			r := c.Match("d", []Entry{{"k", "v"}})
			if r == nil || r.Unit != tt.enum || r.Limit.Period != tt.want {
				t.Fatalf("got %+v, want unit %s period %s", r, tt.enum, tt.want)
			}
			if UnitDuration(tt.enum) != tt.want {
				t.Errorf("UnitDuration(%s) = %s, want %s", tt.enum, UnitDuration(tt.enum), tt.want)
			}
		})
	}
	if d := UnitDuration(rlsv3.RateLimitResponse_RateLimit_UNKNOWN); d != 0 {
		t.Errorf("UnitDuration(UNKNOWN) = %s, want 0", d)
	}
}

func TestParseSource(t *testing.T) {
	c := parseOne(t, "domain: d\ndescriptors:\n  - value: v\n    key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	r := c.Match("d", []Entry{{"k", "v"}})
	if r == nil || r.Source != "f.yaml:4" {
		t.Fatalf("Source = %+v, want f.yaml:4 (the key's line)", r)
	}
}
