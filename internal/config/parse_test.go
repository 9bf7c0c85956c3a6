package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
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

var parseBadTests = []struct {
	name string
	yaml string
	want []string // each must appear in the error text
}{
	{"invalid YAML names its line", "domain: d\ndescriptors:\n  - key: a\n    value: b: c\n",
		[]string{"f.yaml:4: invalid YAML: mapping values are not allowed"}},
	{"tab indentation", "domain: d\n\tdescriptors: []\n", []string{"f.yaml:2: invalid YAML"}},
	{"empty file", "", []string{"f.yaml:1: domain: missing"}},
	{"comment-only file", "# nothing\n", []string{"f.yaml:1: domain: missing"}},
	{"missing domain", "descriptors: []\n", []string{"f.yaml:1: domain: missing or empty"}},
	{"empty domain", "\ndomain: \"\"\n", []string{"f.yaml:2: domain: missing or empty"}},
	{"top level not a mapping", "- domain: d\n", []string{"f.yaml:1: want a mapping, got a list"}},
	{"unknown top-level key", "domain: d\ndomian: e\n", []string{`f.yaml:2: domian: unknown key "domian"`}},
	{"unknown descriptor key", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limt: unknown key "rate_limt"`}},
	{"unknown rate_limit key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_second: 5\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.requests_per_second: unknown key`}},
	{"key in the wrong place", "domain: d\nunit: second\n", []string{`f.yaml:2: unit: unknown key "unit"`}},
	{"unknown replaces key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces: [{nmae: x}]\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.replaces[0].nmae: unknown key`}},
	{"repeated key", "domain: d\ndescriptors:\n  - key: a\n    key: b\n",
		[]string{"f.yaml:4: descriptors[0].key: repeated key (first at line 3)"}},
	{"more than one document", "domain: d\n---\ndomain: e\n", []string{"more than one YAML document"}},
	{"missing key", "domain: d\ndescriptors:\n  - value: v\n", []string{"f.yaml:3: descriptors[0].key: missing or empty"}},
	{"nested missing key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: \"\"\n",
		[]string{"f.yaml:5: descriptors[0].descriptors[0].key: missing or empty"}},
	{"duplicate composite key", "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n",
		[]string{`f.yaml:5: descriptors[1]: duplicate descriptor composite key "d.a_b" (first at f.yaml:3)`}},
	{"duplicate key-only", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: x\n      - key: x\n",
		[]string{`f.yaml:6: descriptors[0].descriptors[1]: duplicate descriptor composite key "d.a.x"`}},
	{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minutes\n",
		[]string{`f.yaml:5: descriptors[0].rate_limit.unit: unknown unit "minutes"`}},
	{"unknown enum value is not a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: unknown}\n",
		[]string{`descriptors[0].rate_limit.unit: unknown unit "unknown"`}},
	{"missing unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit.unit: missing"}},
	{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
		[]string{"f.yaml:6: descriptors[0].rate_limit.unit: must not be set when unlimited is true"}},
	{"unlimited with an algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, algorithm: gcra}\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit.algorithm: must not be set when unlimited is true"}},
	{"replaces with empty name", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - name: \"\"\n",
		[]string{"f.yaml:7: descriptors[0].rate_limit.replaces[0].name: missing or empty"}},
	{"replaces without name", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - {}\n",
		[]string{"f.yaml:7: descriptors[0].rate_limit.replaces[0].name: missing or empty"}},
	{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      replaces: [{name: me}]\n      name: me\n      unit: second\n",
		[]string{`f.yaml:5: descriptors[0].rate_limit.replaces[0].name: a rule cannot replace itself ("me")`}},
	{"requests_per_unit as text", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: ten}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit.requests_per_unit: want a whole number`, `string "ten"`}},
	{"requests_per_unit quoted", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: \"10\"}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number`}},
	{"requests_per_unit negative", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number from 0 to 4294967295, got int -1`}},
	{"requests_per_unit over uint32", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: 4294967296 is larger than 4294967295`}},
	{"requests_per_unit float", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n",
		[]string{`descriptors[0].rate_limit.requests_per_unit: want a whole number`, "float 1.5"}},
	{"key as a list", "domain: d\ndescriptors:\n  - key: [a]\n", []string{"f.yaml:3: descriptors[0].key: want a string, got a list"}},
	{"descriptors as a mapping", "domain: d\ndescriptors: {key: a}\n", []string{"f.yaml:2: descriptors: want a list, got a mapping"}},
	{"descriptor as a string", "domain: d\ndescriptors:\n  - a\n", []string{`f.yaml:3: descriptors[0]: want a mapping, got string "a"`}},
	{"rate_limit as a number", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: 5\n", []string{"f.yaml:4: descriptors[0].rate_limit: want a mapping, got int 5"}},
	{"bad boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n",
		[]string{`f.yaml:4: descriptors[0].shadow_mode: want true or false, got string "maybe"`}},
	{"quoted boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: \"yes\"\n",
		[]string{`descriptors[0].shadow_mode: want true or false`}},
	{"metadata as a list", "domain: d\ndescriptors:\n  - key: a\n    metadata: [a]\n", []string{"f.yaml:4: descriptors[0].metadata: want a mapping, got a list"}},
	{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n",
		[]string{`f.yaml:5: descriptors[0].share_threshold: only applies to a wildcard value`}},
	{"unknown algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: leaky}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit.algorithm: unknown algorithm "leaky"`}},
	{"burst zero", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: gcra, burst: 0}\n",
		[]string{`descriptors[0].rate_limit.burst: must be at least 1`}},
	{"burst on a window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      burst: 5\n",
		[]string{`f.yaml:6: descriptors[0].rate_limit.burst: applies to token_bucket, leaky_bucket and gcra only, not fixed_window`}},
	{"refill_interval not a duration", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      algorithm: token_bucket\n      refill_interval: fast\n",
		[]string{`f.yaml:7: descriptors[0].rate_limit.refill_interval: want a duration`}},
	{"refill_interval on a window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      refill_interval: 10ms\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit: refill_interval and max_debt apply to token_bucket only`}},
	{"refill_interval longer than the period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: token_bucket, refill_interval: 2s}\n",
		[]string{`f.yaml:4: descriptors[0].rate_limit: refill_interval 2s must be whole microseconds between 0 and the period 1s`}},
	{"unit_multiplier zero", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, unit_multiplier: 0}\n",
		[]string{`descriptors[0].rate_limit.unit_multiplier: must be at least 1`}},
	{"unit_multiplier beyond the maximum period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: year, unit_multiplier: 101}\n",
		[]string{`descriptors[0].rate_limit.unit_multiplier: 101 year is longer than`}},
	{"recursive merge alias", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &x {unit: second, <<: *x}\n",
		[]string{"f.yaml:4: descriptors[0].rate_limit: nesting too deep"}},
	{"recursive descriptors alias", "domain: d\ndescriptors: &d\n  - key: a\n    descriptors: *d\n",
		[]string{"nesting too deep"}},
	{"recursive metadata alias", "domain: d\ndescriptors:\n  - key: a\n    metadata: &m {a: *m}\n",
		[]string{"descriptors[0].metadata.a", "nesting too deep"}},
	{"alias bomb", aliasBomb(), []string{"too many nodes"}},
	{"burst beyond MaxCount", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, algorithm: gcra, burst: 1099511627777}\n",
		[]string{`descriptors[0].rate_limit.burst: 1099511627777 is larger than 1099511627776`}},
}

func TestParseBad(t *testing.T) {
	for _, tt := range parseBadTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}})
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Errorf("error %v is not a located *Error", err)
			}
		})
	}
}

// The bucket-only and token_bucket-only options are accepted exactly where
// the algorithm registry says they apply, and what is accepted is a limit
// the store will evaluate (an invalid one would deny every request).
func TestParseOptionsFollowRegistry(t *testing.T) {
	options := map[string]struct {
		yaml    string
		applies func(algorithms.Algorithm) bool
	}{
		"burst":           {"burst: 5", algorithms.Algorithm.Bucket},
		"refill_interval": {"refill_interval: 10ms", algorithms.Algorithm.Stepped},
		"max_debt":        {"max_debt: 1", algorithms.Algorithm.Stepped},
	}
	for _, alg := range algorithms.All() {
		for name, o := range options {
			t.Run(alg.String()+"/"+name, func(t *testing.T) {
				yaml := fmt.Sprintf("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: %s, %s}\n", alg, o.yaml)
				c, err := Parse([]File{{Name: "f.yaml", Data: []byte(yaml)}})
				if !o.applies(alg) {
					if err == nil || !strings.Contains(err.Error(), "only") {
						t.Fatalf("Parse = %v, want %s refused for %s", err, name, alg)
					}
					return
				}
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if r := c.Match("d", []Entry{{Key: "a"}}); r == nil || r.Limit.Validate() != nil {
					t.Fatalf("rule %+v, want a valid limit", r)
				}
			})
		}
	}
}

func TestParseReportsEveryError(t *testing.T) {
	files := []File{
		{Name: "a.yaml", Data: []byte("domain: a\ndescriptors:\n  - key: x\n    rate_limit: {unit: minutes}\n  - key: y\n    bogus: 1\n")},
		{Name: "b.yaml", Data: []byte("domain: [b\n")},
		{Name: "good.yaml", Data: []byte("domain: g\n")},
		{Name: "c.yaml", Data: []byte("domain: a\n")},
	}
	_, err := Parse(files)
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	for _, w := range []string{
		`a.yaml:4: descriptors[0].rate_limit.unit: unknown unit "minutes"`,
		`a.yaml:6: descriptors[1].bogus: unknown key`,
		`b.yaml:1: invalid YAML`,
		`c.yaml:1: domain: duplicate domain "a" (also in a.yaml)`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "good.yaml") {
		t.Errorf("good file reported: %v", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("got %d errors, want 4:\n%v", n, err)
	}
}

func TestParseMergeDomains(t *testing.T) {
	a := File{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: x\n    rate_limit: {unit: second, requests_per_unit: 1}\n")}
	b := File{Name: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: y\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")}
	dup := File{Name: "dup.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: x\n")}

	if _, err := Parse([]File{a, b}); err == nil || !strings.Contains(err.Error(), `b.yaml:1: domain: duplicate domain "d"`) {
		t.Fatalf("without merge: err = %v, want duplicate domain in b.yaml", err)
	}
	c, err := Parse([]File{a, b}, WithMergeDomains(true))
	if err != nil {
		t.Fatalf("with merge: %v", err)
	}
	if r := c.Match("d", []Entry{{"x", "1"}}); r == nil || r.RequestsPerUnit != 1 || r.Source != "a.yaml:3" {
		t.Errorf("x from a.yaml: got %+v", r)
	}
	if r := c.Match("d", []Entry{{"y", "1"}}); r == nil || r.RequestsPerUnit != 2 || r.Source != "b.yaml:3" {
		t.Errorf("y from b.yaml: got %+v", r)
	}
	if got := c.Domains(); !reflect.DeepEqual(got, []string{"d"}) {
		t.Errorf("Domains = %v", got)
	}
	_, err = Parse([]File{a, dup}, WithMergeDomains(true))
	if err == nil || !strings.Contains(err.Error(), `dup.yaml:3: descriptors[0]: duplicate descriptor composite key "d.x" (first at a.yaml:3)`) {
		t.Errorf("merge with a duplicate: err = %v", err)
	}
}

func TestParseDomains(t *testing.T) {
	c, err := Parse([]File{
		{Name: "z.yaml", Data: []byte("domain: zeta\n")},
		{Name: "a.yaml", Data: []byte("domain: alpha\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Domains(); !reflect.DeepEqual(got, []string{"alpha", "zeta"}) {
		t.Errorf("Domains = %v", got)
	}
	if !c.HasDomain("zeta") || c.HasDomain("beta") {
		t.Errorf("HasDomain wrong")
	}
	var nilCfg *Config
	if nilCfg.HasDomain("zeta") || nilCfg.Domains() != nil || nilCfg.Match("zeta", []Entry{{"a", "b"}}) != nil || nilCfg.Dump() != "" {
		t.Errorf("nil Config is not empty")
	}
	empty, err := Parse(nil)
	if err != nil || len(empty.Domains()) != 0 {
		t.Errorf("Parse(nil) = %v, %v; want an empty config", empty, err)
	}
}

func TestDump(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 7, algorithm: gcra, burst: 9, name: n}
  - key: c
    rate_limit: {unlimited: true}
`)
	want := `d.a: unit=SECOND requests_per_unit=1, shadow_mode: false, algorithm=fixed_window period=1s (f.yaml:4)
d.a.b: unit=HOUR requests_per_unit=7, shadow_mode: true, algorithm=gcra period=1h0m0s burst=9, name="n" (f.yaml:7)
d.c: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, unlimited: true (f.yaml:10)
`
	if got := c.Dump(); got != want {
		t.Errorf("Dump:\n%s\nwant:\n%s", got, want)
	}
}

func TestExampleConfigLoads(t *testing.T) {
	c, err := LoadDir("../../api/examples")
	if err != nil {
		t.Fatalf("api/examples: %v", err)
	}
	if !reflect.DeepEqual(c.Domains(), []string{"example"}) {
		t.Fatalf("domains = %v", c.Domains())
	}
	tests := []struct {
		entries []Entry
		check   func(*Rule) bool
	}{
		{[]Entry{{"generic_key", "default"}}, func(r *Rule) bool { return r.RequestsPerUnit == 500 }},
		{[]Entry{{"remote_address", "10.0.0.1"}}, func(r *Rule) bool { return r.Unlimited }},
		{[]Entry{{"remote_address", "10.0.0.2"}}, func(r *Rule) bool { return r.Limit.Algorithm == algorithms.SlidingWindow }},
		{[]Entry{{"path", "/api/v1/orders"}, {"user_id", "bob"}}, func(r *Rule) bool { return r.Name == "user_api" }},
		{[]Entry{{"path", "/api/v1/orders"}, {"user_id", "premium-7"}}, func(r *Rule) bool {
			return reflect.DeepEqual(r.Replaces, []string{"user_api"})
		}},
		{[]Entry{{"path", "/downloads/a.pdf"}}, func(r *Rule) bool { return r.ShadowMode && r.ShareThreshold }},
		{[]Entry{{"user_id", "bob"}, {"operation", "search"}}, func(r *Rule) bool {
			return r.Limit.Algorithm == algorithms.TokenBucket && r.Limit.Burst == 50
		}},
		{[]Entry{{"tenant", "acme"}}, func(r *Rule) bool { return r.Limit.Period == 90*24*time.Hour }},
	}
	for _, tt := range tests {
		r := c.Match("example", tt.entries)
		if r == nil || !tt.check(r) {
			t.Errorf("Match(%v) = %+v", tt.entries, r)
		}
	}
}

// aliasBomb nests descriptor lists of aliases so that walking it would
// visit 10^9 descriptors.
func aliasBomb() string {
	var sb strings.Builder
	sb.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: a}]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&sb, "  - key: l%d\n    descriptors: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "{key: k%d, descriptors: *l%d}", j, i-1)
		}
		sb.WriteString("]\n")
	}
	return sb.String()
}

// FuzzParse checks that no input makes Parse panic and that every error is
// located in the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(matchConfig))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: &x {unit: second, <<: *x}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    metadata: {a: [1, {b: ~}], c: 2001-01-01}\n    rate_limit: {unit: year, unit_multiplier: 100, algorithm: gcra, burst: 3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse([]File{{Name: "f.yaml", Data: data}})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error not located in the file: %v", err)
			}
			return
		}
		_ = c.Dump()
	})
}

func TestParseCapsErrorsPerFile(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("domain: d\ndescriptors:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  - key: k%d\n    bogus: 1\n", i)
	}
	_, err := Parse([]File{{Name: "big.yaml", Data: []byte(sb.String())}, {Name: "other.yaml", Data: []byte("nope: 1\n")}})
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if n := strings.Count(err.Error(), "big.yaml:"); n != maxErrorsPerFile {
		t.Errorf("big.yaml reported %d lines, want %d (the last one the cap notice)", n, maxErrorsPerFile)
	}
	if !strings.Contains(err.Error(), "big.yaml: too many errors") || !strings.Contains(err.Error(), "other.yaml:1: nope: unknown key") {
		t.Errorf("missing the cap notice or the other file's error; last lines: %q", lines[len(lines)-3:])
	}
}
