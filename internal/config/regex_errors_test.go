package config

import (
	"fmt"
	"strings"
	"testing"
)

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
