package config

import (
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
