package config

import (
	"fmt"
	"strings"
	"testing"
)

// regexConfig puts value_regex nodes beside exact values, wildcards and a
// key alone; each rule's requests_per_unit identifies it.
const regexConfig = `
domain: d
descriptors:
  - key: path
    value_regex: "/api/v[0-9]+/.*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/v1/health
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /api/v2/*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value_regex: "/api/.*"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: code
    value_regex: "5[0-9]{2}"
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: code
    value_regex: "(?m)^4..$"
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: opt
    value_regex: "x?"
    rate_limit: {unit: second, requests_per_unit: 8}
  - key: tenant
    value_regex: "acme-.*"
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 9}
  - key: tenant
    descriptors:
      - key: plan
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: ip
    value_regex: "10\\..*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 11}
  - key: ip
    value: "10.*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 12}
`

func TestMatchValueRegex(t *testing.T) {
	c := parseOne(t, regexConfig)
	tests := []struct {
		name    string
		entries []Entry
		want    uint32 // requests_per_unit of the rule; 0 = no rule
	}{
		{"regex beats the key alone", []Entry{{"path", "/api/v3/users"}}, 1},
		{"exact value beats an earlier regex", []Entry{{"path", "/api/v1/health"}}, 2},
		{"wildcard beats an earlier regex", []Entry{{"path", "/api/v2/users"}}, 3},
		{"first matching regex in config order", []Entry{{"path", "/api/v9/x"}}, 1},
		{"a later regex when the first fails", []Entry{{"path", "/api/vX/x"}}, 4},
		{"the key alone when no regex matches", []Entry{{"path", "/web"}}, 5},
		{"the regex must match the whole value", []Entry{{"code", "5000"}}, 0},
		{"not a substring either", []Entry{{"code", "x500"}}, 0},
		{"whole value", []Entry{{"code", "503"}}, 6},
		{"(?m) in the pattern does not loosen the anchors", []Entry{{"code", "404\nxyz"}}, 0},
		{"(?m) pattern on a single line", []Entry{{"code", "404"}}, 7},
		{"a regex may match the empty value", []Entry{{"opt", ""}}, 8},
		{"nested under a regex", []Entry{{"tenant", "acme-eu"}, {"user", "u"}}, 9},
		{"no backtracking from a regex to the key alone", []Entry{{"tenant", "acme-eu"}, {"plan", "p"}}, 0},
		{"nested under the key alone", []Entry{{"tenant", "other"}, {"plan", "p"}}, 10},
		{"the literal text of a wildcard is an exact value", []Entry{{"ip", "10.*"}}, 12},
		{"the wildcard ranks before the regex", []Entry{{"ip", "10.1.2.3"}}, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Match("d", tt.entries)
			switch {
			case tt.want == 0 && r != nil:
				t.Errorf("Match = %s, want none", r.StatKey)
			case tt.want != 0 && r == nil:
				t.Errorf("Match = nil, want rule %d", tt.want)
			case tt.want != 0 && r.RequestsPerUnit != tt.want:
				t.Errorf("Match = %s (%d), want rule %d", r.StatKey, r.RequestsPerUnit, tt.want)
			}
		})
	}
}

func TestValueRegexStatKeyAndSource(t *testing.T) {
	c := parseOne(t, regexConfig)
	r := c.Match("d", []Entry{{"path", "/api/v3/users"}})
	if r == nil || r.StatKey != "d.path=~/api/v[0-9]+/.*" || r.Source != "f.yaml:4" {
		t.Fatalf("rule = %+v, want stats key d.path=~/api/v[0-9]+/.* from f.yaml:4", r)
	}
	if got := r.MetricKey([]Entry{{"path", "/api/v3/users"}}); got != r.StatKey {
		t.Errorf("MetricKey = %q, want the stats key", got)
	}
}

func TestValueRegexMetricKey(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: a
    value_regex: "x.*"
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    value_regex: "y.*"
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: c
    value_regex: "z.*"
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	for _, tt := range []struct {
		entry Entry
		want  string
	}{
		{Entry{"a", "x1"}, "d.a_x1"},   // value_to_metric: the request's value
		{Entry{"b", "y1"}, "d.b=~y.*"}, // shared: the pattern, as for a wildcard
		{Entry{"c", "z1"}, "d.c_z1"},   // detailed_metric: the value
	} {
		r := c.Match("d", []Entry{tt.entry})
		if r == nil {
			t.Fatalf("no rule for %v", tt.entry)
		}
		if got := r.MetricKey([]Entry{tt.entry}); got != tt.want {
			t.Errorf("MetricKey(%v) = %q, want %q", tt.entry, got, tt.want)
		}
	}
}

func TestValueRegexKeys(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: p
    value_regex: "a.*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: p
    value_regex: "b.*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: q
    value: "a.*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	b := KeyBuilder{}
	key := func(e Entry) string {
		t.Helper()
		r := c.Match("d", []Entry{e})
		if r == nil {
			t.Fatalf("no rule for %v", e)
		}
		return b.Key(r, []Entry{e})
	}
	if k1, k2 := key(Entry{"p", "a1"}), key(Entry{"p", "a2"}); k1 != k2 || k1 != "{d:1:p:~3:a.*}:fixed_window.int:1s" {
		t.Errorf("shared regex: %q and %q, want both {d:1:p:~3:a.*}:fixed_window.int:1s", k1, k2)
	}
	if k1, k2 := key(Entry{"p", "b1"}), key(Entry{"p", "b2"}); k1 == k2 {
		t.Errorf("unshared regex shares a counter: %q", k1)
	}
	// A wildcard with the same text as a regex keeps its own counter.
	if k := key(Entry{"q", "a.x"}); k != "{d:1:q:*3:a.*}:fixed_window.int:1s" {
		t.Errorf("shared wildcard key %q", k)
	}
}

func TestParseValueRegexErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"invalid RE2", "domain: d\ndescriptors:\n  - key: k\n    value_regex: \"a(b\"\n",
			"f.yaml:4: descriptors[0].value_regex: invalid RE2 regular expression: error parsing regexp: missing closing )"},
		{"backreferences are not RE2", "domain: d\ndescriptors:\n  - key: k\n    value_regex: '(a)\\1'\n",
			"f.yaml:4: descriptors[0].value_regex: invalid RE2 regular expression"},
		{"an unbalanced pattern is not completed by the anchors", "domain: d\ndescriptors:\n  - key: k\n    value_regex: \"a)|(b\"\n",
			"f.yaml:4: descriptors[0].value_regex: invalid RE2 regular expression"},
		{"too long", "domain: d\ndescriptors:\n  - key: k\n    value_regex: " + strings.Repeat("a", MaxValueRegexLen+1) + "\n",
			"f.yaml:4: descriptors[0].value_regex: 1025 characters, longer than the 1024 allowed"},
		{"empty", "domain: d\ndescriptors:\n  - key: k\n    value_regex: \"\"\n",
			"f.yaml:4: descriptors[0].value_regex: empty"},
		{"not a scalar", "domain: d\ndescriptors:\n  - key: k\n    value_regex: [a]\n",
			"f.yaml:4: descriptors[0].value_regex: want a string, got a list"},
		{"value and value_regex on one node", "domain: d\ndescriptors:\n  - key: k\n    value: a\n    value_regex: a.*\n",
			"f.yaml:5: descriptors[0].value_regex: set either value (line 4) or value_regex, not both"},
		{"the same regex twice under one key", "domain: d\ndescriptors:\n  - key: k\n    value_regex: a.*\n  - key: k\n    value_regex: a.*\n",
			`f.yaml:6: descriptors[1].value_regex: duplicate value_regex "a.*" for key "k" (first at f.yaml:3)`},
		{"the same regex twice in nested descriptors", "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - {key: j, value_regex: x+}\n      - {key: j, value_regex: x+}\n",
			`f.yaml:6: descriptors[0].descriptors[1].value_regex: duplicate value_regex "x+"`},
		{"share_threshold on an exact value still fails", "domain: d\ndescriptors:\n  - key: k\n    value: a\n    share_threshold: true\n",
			"f.yaml:5: descriptors[0].share_threshold: only applies to a wildcard value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseValueRegexAllowed(t *testing.T) {
	for name, yaml := range map[string]string{
		"the same regex under different keys":        "domain: d\ndescriptors:\n  - {key: a, value_regex: x.*}\n  - {key: b, value_regex: x.*}\n",
		"the same regex under different parents":     "domain: d\ndescriptors:\n  - {key: a, value: 1, descriptors: [{key: b, value_regex: x}]}\n  - {key: a, value: 2, descriptors: [{key: b, value_regex: x}]}\n",
		"a regex whose text equals an exact sibling": "domain: d\ndescriptors:\n  - {key: a, value: x}\n  - {key: a, value_regex: x}\n",
		"null is absent":             "domain: d\ndescriptors:\n  - {key: a, value_regex: null}\n",
		"a number is read as text":   "domain: d\ndescriptors:\n  - {key: a, value_regex: 500}\n",
		"the longest pattern":        "domain: d\ndescriptors:\n  - {key: a, value_regex: " + strings.Repeat("é", MaxValueRegexLen) + "}\n",
		"share_threshold on a regex": "domain: d\ndescriptors:\n  - {key: a, value_regex: x.*, share_threshold: true}\n",
	} {
		if _, err := Parse([]File{{Name: "f.yaml", Data: []byte(yaml)}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMatchValueRegexDoesNotAllocate(t *testing.T) {
	c := parseOne(t, regexConfig)
	for _, entries := range [][]Entry{
		{{"path", "/api/v3/users"}},
		{{"path", "/api/vX/x"}},
		{{"path", "/web"}},
		{{"tenant", "acme-eu"}, {"user", "u"}},
		{{"code", strings.Repeat("5", 1000)}},
	} {
		c.Match("d", entries) // warm the regexp machine pools
		if n := testing.AllocsPerRun(100, func() { c.Match("d", entries) }); n != 0 {
			t.Errorf("Match(%.40v) allocates %.0f times", entries, n)
		}
	}
}

// regexBenchConfig has 1000 rules under one key: 250 exact values, 250
// wildcards and 500 value_regexes, the shapes a large API gateway config
// would have (routes by version, tenants by prefix). regexFormat is the
// regexes' pattern, with %d for the rule's number.
func regexBenchConfig(tb testing.TB, regexFormat string) *Config {
	var sb strings.Builder
	sb.WriteString("domain: bench\ndescriptors:\n")
	for i := range 250 {
		fmt.Fprintf(&sb, "  - key: path\n    value: /exact/%d\n    rate_limit: {unit: second, requests_per_unit: 10}\n", i)
		fmt.Fprintf(&sb, "  - key: path\n    value: /glob/%d/*\n    rate_limit: {unit: second, requests_per_unit: 10}\n", i)
	}
	for i := range 500 {
		fmt.Fprintf(&sb, "  - key: path\n    value_regex: '"+regexFormat+"'\n    rate_limit: {unit: second, requests_per_unit: 10}\n", i)
	}
	c, err := Parse([]File{{Name: "bench.yaml", Data: []byte(sb.String())}})
	if err != nil {
		tb.Fatal(err)
	}
	if n := c.CountRules("bench"); n != 1000 {
		tb.Fatalf("%d rules, want 1000", n)
	}
	return c
}

// BenchmarkMatch1000Rules: a request pays for every sibling tried before
// its match. Regexes with a literal prefix are rejected by it in a few
// nanoseconds; the "any-prefix" cases show the cost of 500 regexes that
// must each be run.
func BenchmarkMatch1000Rules(b *testing.B) {
	c := regexBenchConfig(b, "/re/%d/v[0-9]+/[a-z]+")
	anyPrefix := regexBenchConfig(b, "[a-z/]+/%d/v[0-9]+/[a-z]+")
	cases := []struct {
		name    string
		cfg     *Config
		entries []Entry
		match   bool
	}{
		{"exact", c, []Entry{{"path", "/exact/249"}}, true},
		{"wildcard-last", c, []Entry{{"path", "/glob/249/x"}}, true},
		{"regex-first", c, []Entry{{"path", "/re/0/v1/users"}}, true},
		{"regex-last", c, []Entry{{"path", "/re/499/v1/users"}}, true},
		{"miss-after-every-regex", c, []Entry{{"path", "/nothing"}}, false},
		{"any-prefix-regex-last", anyPrefix, []Entry{{"path", "/re/499/v1/users"}}, true},
		{"any-prefix-miss", anyPrefix, []Entry{{"path", "/re/500/v1/users"}}, false},
	}
	for _, tc := range cases {
		if got := tc.cfg.Match("bench", tc.entries) != nil; got != tc.match {
			b.Fatalf("%s: matched %t, want %t", tc.name, got, tc.match)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.cfg.Match("bench", tc.entries)
			}
		})
	}
}
