package config

import (
	"fmt"
	"strings"
	"testing"
)

// matchConfig exercises envoyproxy's matching rules; each rule's
// requests_per_unit identifies it in the table below.
const matchConfig = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: x
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: a
    value: x*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: a
    value: x*z
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: a
    value: "*q"
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: b
    value: "*-*-*"
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: e
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: e
    rate_limit: {unit: second, requests_per_unit: 8}
  - key: p
    value: pre
    descriptors:
      - key: q
        rate_limit: {unit: second, requests_per_unit: 9}
  - key: p
    descriptors:
      - key: r
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: m
    value: v
    rate_limit: {unit: second, requests_per_unit: 11}
    descriptors:
      - key: n
        rate_limit: {unit: second, requests_per_unit: 12}
  - key: s
    value: "a*b*c"
    rate_limit: {unit: second, requests_per_unit: 13}
  - key: u_v
    rate_limit: {unit: second, requests_per_unit: 14}
  - key: u
    value: v
    rate_limit: {unit: second, requests_per_unit: 15}
  - key: w
    value: 1*
    descriptors:
      - key: w2
        rate_limit: {unit: second, requests_per_unit: 16}
`

func TestMatch(t *testing.T) {
	c := parseOne(t, matchConfig)
	tests := []struct {
		name    string
		domain  string
		entries []Entry
		want    uint32 // requests_per_unit of the rule; 0 = no rule
	}{
		{"exact value beats wildcard and key", "d", []Entry{{"a", "x"}}, 2},
		{"wildcard beats key", "d", []Entry{{"a", "xy"}}, 3},
		{"first wildcard in config order", "d", []Entry{{"a", "xyz"}}, 3},
		{"leading wildcard", "d", []Entry{{"a", "abq"}}, 5},
		{"key alone as fallback", "d", []Entry{{"a", "y"}}, 1},
		{"empty value skips exact, falls to key", "d", []Entry{{"a", ""}}, 1},
		{"literal pattern text matches its node", "d", []Entry{{"a", "x*z"}}, 4},
		{"several wildcards", "d", []Entry{{"b", "1-2-3"}}, 6},
		{"several wildcards, too few separators", "d", []Entry{{"b", "1-2"}}, 0},
		{"star matches the empty value before the key", "d", []Entry{{"e", ""}}, 7},
		{"star matches any value", "d", []Entry{{"e", "anything"}}, 7},
		{"wildcards in the middle", "d", []Entry{{"s", "aXXbYYc"}}, 13},
		{"wildcards need every part in order", "d", []Entry{{"s", "acb"}}, 0},
		{"wildcards may match empty runs", "d", []Entry{{"s", "abc"}}, 13},
		{"nested under a value", "d", []Entry{{"p", "pre"}, {"q", "1"}}, 9},
		{"nested under a key", "d", []Entry{{"p", "other"}, {"r", "1"}}, 10},
		{"no backtracking to the key-only sibling", "d", []Entry{{"p", "pre"}, {"r", "1"}}, 0},
		{"node without rate_limit", "d", []Entry{{"p", "pre"}}, 0},
		{"parent with its own limit", "d", []Entry{{"m", "v"}}, 11},
		{"child of a limited parent", "d", []Entry{{"m", "v"}, {"n", "1"}}, 12},
		{"request deeper than the config", "d", []Entry{{"m", "v"}, {"n", "1"}, {"o", "2"}}, 0},
		{"leaf limit does not apply to longer requests", "d", []Entry{{"a", "x"}, {"zz", "1"}}, 0},
		{"nested under a wildcard", "d", []Entry{{"w", "123"}, {"w2", "z"}}, 16},
		{"key with underscore is its own key", "d", []Entry{{"u_v", "1"}}, 14},
		{"key and value are not joined", "d", []Entry{{"u", "v"}}, 15},
		{"unknown key", "d", []Entry{{"zz", "1"}}, 0},
		{"unknown domain", "other", []Entry{{"a", "x"}}, 0},
		{"no entries", "d", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Match(tt.domain, tt.entries)
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

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*", "a", true},
		{"a*", "ba", false},
		{"*a", "ba", true},
		{"*a", "ab", false},
		{"a*a", "a", false}, // prefix and suffix must not overlap
		{"a*a", "aa", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "a1b2b3c", true},
		{"a*b*c", "acbc", true},
		{"a*b*c", "acb", false},
		{"**", "x", true},
		{"*ab*ab*", "abab", true},
		{"*ab*ab*", "aba", false},
	}
	for _, tt := range tests {
		if got := newGlob(tt.pattern).match(tt.s); got != tt.want {
			t.Errorf("glob %q match %q = %t, want %t", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	c := parseOne(t, matchConfig)
	for _, entries := range [][]Entry{
		{{"a", "x"}},
		{{"a", "xyz"}},
		{{"p", "other"}, {"r", "1"}},
		{{"w", "123"}, {"w2", "z"}},
		{{"zz", "1"}},
	} {
		if n := testing.AllocsPerRun(100, func() { c.Match("d", entries) }); n != 0 {
			t.Errorf("Match(%v) allocates %.0f times", entries, n)
		}
	}
}

// benchConfig has many siblings at every level, like a large deployment.
func benchConfig(tb testing.TB) *Config {
	var sb strings.Builder
	sb.WriteString("domain: bench\ndescriptors:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  - key: k%d\n    value: v%d\n    descriptors:\n", i, i)
		for j := range 20 {
			fmt.Fprintf(&sb, "      - key: user\n        value: u%d-*\n        rate_limit: {unit: second, requests_per_unit: 10}\n", j)
		}
		sb.WriteString("      - key: user\n        descriptors:\n          - key: op\n            rate_limit: {unit: minute, requests_per_unit: 5}\n")
	}
	c, err := Parse([]File{{Name: "bench.yaml", Data: []byte(sb.String())}})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func BenchmarkMatch(b *testing.B) {
	c := benchConfig(b)
	cases := map[string][]Entry{
		"exact-then-key-3-levels": {{"k150", "v150"}, {"user", "alice"}, {"op", "search"}},
		"wildcard-20th":           {{"k7", "v7"}, {"user", "u19-bob"}},
		"miss":                    {{"nope", "x"}},
	}
	for name, entries := range cases {
		if name != "miss" && c.Match("bench", entries) == nil {
			b.Fatalf("%s: no match", name)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Match("bench", entries)
			}
		})
	}
}
