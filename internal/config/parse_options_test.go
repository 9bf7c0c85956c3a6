package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The bucket-only and token_bucket-only options are accepted exactly where
// the algorithm registry says they apply, and what is accepted is a limit
// the store will evaluate (an invalid one would deny every request).
func TestParseOptionsFollowRegistry(t *testing.T) {
	options := map[string]struct {
		yaml    string
		applies func(algorithms.Algorithm) bool
	}{
		"burst":           {"burst: 5", func(a algorithms.Algorithm) bool { return a.Info().Bucket }},
		"refill_interval": {"refill_interval: 10ms", func(a algorithms.Algorithm) bool { return a.Info().Stepped }},
		"max_debt":        {"max_debt: 1", func(a algorithms.Algorithm) bool { return a.Info().Stepped }},
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
