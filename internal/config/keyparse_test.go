package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func TestParseKeyInvertsKey(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 100}
`)
	tests := []struct {
		name    string
		prefix  string
		rule    *Rule
		entries []Entry
		shared  []bool
	}{
		{"readable", "rl:", ruleFor("example", algorithms.FixedWindow, time.Minute), []Entry{{"user_id", "alice"}}, []bool{false}},
		{"empty values, two levels", "", ruleFor("d", algorithms.GCRA, 24*time.Hour), []Entry{{"a", ""}, {"b", "c"}}, []bool{false, false}},
		{"sub-second period", "", ruleFor("d", algorithms.TokenBucket, 1500*time.Millisecond), []Entry{{"k", "v"}}, []bool{false}},
		{"escapes and separator-looking text", "p{x}%:", ruleFor("a{b}%:", algorithms.SlidingLog, time.Second),
			[]Entry{{"k{:1:", "}v%:%7D"}, {"*", "*3:abc"}}, []bool{false, false}},
		{"shared wildcard", "", c.Match("d", []Entry{{"path", "/files/a"}}), []Entry{{"path", "/files/*"}}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := KeyBuilder{Prefix: tt.prefix}
			key := b.Key(tt.rule, tt.entries)
			if !strings.HasPrefix(key, b.DomainPrefix(tt.rule.Domain)) {
				t.Errorf("key %q lacks the domain prefix %q", key, b.DomainPrefix(tt.rule.Domain))
			}
			pk, err := b.ParseKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if pk.Domain != tt.rule.Domain || !slices.Equal(pk.Entries, tt.entries) || !slices.Equal(pk.Shared, tt.shared) ||
				pk.Algorithm != tt.rule.Limit.Algorithm.String() || pk.Period != tt.rule.Limit.Period {
				t.Errorf("ParseKey(%q) = %+v", key, pk)
			}
			// Entries read back from a key name its counter again, a
			// shared wildcard's pattern included.
			if r := c.Match(pk.Domain, pk.Entries); tt.name == "shared wildcard" && (r == nil || b.Key(r, pk.Entries) != key) {
				t.Errorf("the entries read from %q do not build it again", key)
			}
		})
	}
}

func TestDomainPrefixIsOwnDomainOnly(t *testing.T) {
	b := KeyBuilder{Prefix: "rl:"}
	key := b.Key(ruleFor("a:1:b", algorithms.FixedWindow, time.Minute), []Entry{{"k", "v"}})
	if strings.HasPrefix(key, b.DomainPrefix("a")) {
		t.Errorf("domain a:1:b's key %q starts with domain a's prefix %q", key, b.DomainPrefix("a"))
	}
}

func TestParseKeyRejects(t *testing.T) {
	b := KeyBuilder{Prefix: "rl:"}
	for _, key := range []string{
		"", "rl:", "other:{d:1:k:1:v}:fixed_window:60s", "rl:{d}:fixed_window:60s",
		"rl:{d:1:k:1:v}", "rl:{d:1:k:1:v}:fixed_window:60", "rl:{d:1:k:1:v}:fixed_window:0s",
		"rl:{d:9:k:1:v}:fixed_window:60s", "rl:{d:x:k:1:v}:fixed_window:60s", "rl:{d:1:k:1:%Z}:fixed_window:60s",
		"ratelimitd:queue:{emails}:waiting",
	} {
		if pk, err := b.ParseKey(key); err == nil {
			t.Errorf("ParseKey(%q) = %+v, want an error", key, pk)
		}
	}
}
