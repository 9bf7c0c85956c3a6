package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func ruleFor(domain string, a algorithms.Algorithm, period time.Duration) *Rule {
	r := &Rule{Domain: domain, Limit: algorithms.Limit{Algorithm: a, Requests: 1, Period: period}}
	r.key = newKeyParts(r)
	return r
}

func TestKeyLayout(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		rule    *Rule
		entries []Entry
		want    string
	}{
		{"readable", "rl:", ruleFor("example", algorithms.FixedWindow, time.Minute),
			[]Entry{{"user_id", "alice"}}, "rl:{example:7:user_id:5:alice}:fixed_window.int:60s"},
		{"two levels, empty value", "", ruleFor("d", algorithms.GCRA, 24*time.Hour),
			[]Entry{{"a", ""}, {"b", "c"}}, "{d:1:a:0::1:b:1:c}:gcra:86400s"},
		{"sub-second period", "", ruleFor("d", algorithms.TokenBucket, 1500*time.Millisecond),
			[]Entry{{"k", "v"}}, "{d:1:k:1:v}:token_bucket:1500000us"},
		{"no entries", "", ruleFor("d", algorithms.FixedWindow, time.Second), nil, "{d}:fixed_window.int:1s"},
		{"braces and percent escaped everywhere, colon in the domain", "p{x}%:", ruleFor("a{b}%:", algorithms.FixedWindow, time.Second),
			[]Entry{{"k{", "}v%"}}, "p%7Bx%7D%25:{a%7Bb%7D%25%3A:2:k%7B:3:%7Dv%25}:fixed_window.int:1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (KeyBuilder{Prefix: tt.prefix}).Key(tt.rule, tt.entries); got != tt.want {
				t.Errorf("Key = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyDistinct(t *testing.T) {
	b := KeyBuilder{Prefix: "rl_"}
	r := ruleFor("d", algorithms.FixedWindow, time.Minute)
	pairs := []struct {
		name string
		a, b []Entry
	}{
		{"underscore moved between key and value", []Entry{{"a", "b_c"}}, []Entry{{"a_b", "c"}}},
		{"separator-looking value", []Entry{{"a", "1:b"}}, []Entry{{"a:1", "b"}}},
		{"one entry vs two", []Entry{{"a", "b:1:c:1:d"}}, []Entry{{"a", "b"}, {"c", "d"}}},
		{"empty value vs no entry", []Entry{{"a", ""}}, []Entry{{"a", ""}, {"", ""}}},
		{"length digits in value", []Entry{{"a", "1:x"}}, []Entry{{"a", "1"}, {"x", ""}}},
		{"escape-looking value", []Entry{{"a", "%7D"}}, []Entry{{"a", "}"}}},
	}
	for _, p := range pairs {
		if ka, kb := b.Key(r, p.a), b.Key(r, p.b); ka == kb {
			t.Errorf("%s: %v and %v share key %q", p.name, p.a, p.b, ka)
		}
	}
	e := []Entry{{"k", "v"}}
	base := b.Key(r, e)
	for _, other := range []*Rule{
		ruleFor("d:1:k:1:v", algorithms.FixedWindow, time.Minute),
		ruleFor("d", algorithms.SlidingWindow, time.Minute),
		ruleFor("d", algorithms.FixedWindow, time.Hour),
		ruleFor("d2", algorithms.FixedWindow, time.Minute),
	} {
		if k := b.Key(other, e); k == base {
			t.Errorf("rule %+v shares key %q with the base rule", other.Limit, k)
		}
	}
}

func TestKeyShareThreshold(t *testing.T) {
	c := parseOne(t, `
domain: d
descriptors:
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    value: /own/*
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: model
    value: gpt-*
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 5}
`)
	b := KeyBuilder{}
	key := func(entries ...Entry) string {
		t.Helper()
		r := c.Match("d", entries)
		if r == nil {
			t.Fatalf("no rule for %v", entries)
		}
		return b.Key(r, entries)
	}
	if k1, k2 := key(Entry{"path", "/files/a.pdf"}), key(Entry{"path", "/files/b.csv"}); k1 != k2 || k1 != "{d:4:path:*8:/files/*}:fixed_window.int:3600s" {
		t.Errorf("shared wildcard: %q and %q, want both {d:4:path:*8:/files/*}:fixed_window.int:3600s", k1, k2)
	}
	if k1, k2 := key(Entry{"path", "/own/a"}), key(Entry{"path", "/own/b"}); k1 == k2 {
		t.Errorf("unshared wildcard shares a counter: %q", k1)
	}
	if shared, literal := key(Entry{"path", "/files/x"}), key(Entry{"path", "*8:/files/*"}); shared == literal {
		t.Errorf("a literal value reproduces the shared key %q", shared)
	}
	// share_threshold on an inner node shares that level only.
	if k1, k2 := key(Entry{"model", "gpt-4"}, Entry{"user", "u1"}), key(Entry{"model", "gpt-5"}, Entry{"user", "u1"}); k1 != k2 {
		t.Errorf("inner shared level: %q != %q", k1, k2)
	}
	if k1, k2 := key(Entry{"model", "gpt-4"}, Entry{"user", "u1"}), key(Entry{"model", "gpt-4"}, Entry{"user", "u2"}); k1 == k2 {
		t.Errorf("users share a counter: %q", k1)
	}
}

func TestKeyOverrideMatchesConfiguredFixedWindow(t *testing.T) {
	c := parseOne(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")
	entries := []Entry{{"k", "v"}}
	o, err := OverrideRule("d", entries, rlsv3.RateLimitResponse_RateLimit_MINUTE, 42)
	if err != nil {
		t.Fatal(err)
	}
	if o.StatKey != "d.k_v" || o.RequestsPerUnit != 42 || o.Limit.Requests != 42 || o.Limit.Period != time.Minute {
		t.Errorf("override rule = %+v", o)
	}
	// An invalid limit would deny every request the override applies to.
	if err := o.Limit.Validate(); err != nil || o.Limit.Burst != 0 {
		t.Errorf("override limit %+v: Validate() = %v, want valid without burst", o.Limit, err)
	}
	b := KeyBuilder{Prefix: "x"}
	if got, want := b.Key(o, entries), b.Key(c.Match("d", entries), entries); got != want {
		t.Errorf("override key %q != configured key %q (envoyproxy shares them)", got, want)
	}
	if _, err := OverrideRule("d", entries, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 1); err == nil {
		t.Error("override with UNKNOWN unit: want an error")
	}
}

func TestKeyAllocatesOnce(t *testing.T) {
	r := ruleFor("example", algorithms.FixedWindow, time.Minute)
	e := []Entry{{"remote_address", "203.0.113.9"}, {"path", "/api/v1/orders/123456"}}
	b := KeyBuilder{Prefix: "ratelimit:"}
	if n := testing.AllocsPerRun(100, func() { b.Key(r, e) }); n != 1 {
		t.Errorf("Key allocates %.0f times, want 1", n)
	}
}

// clusterTag is the part of key Redis Cluster hashes: the text between the
// first '{' and the next '}', when not empty.
func clusterTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}

type keyPart struct {
	shared bool
	text   string
}

// decodeKey parses a key back into its parts; a successful round trip for
// every input is what makes the encoding injective.
func decodeKey(t *testing.T, prefixLen int, key string) (domain, alg, period string, parts []keyPart) {
	t.Helper()
	rest := key[prefixLen:]
	if !strings.HasPrefix(rest, "{") {
		t.Fatalf("key %q: no tag after the prefix", key)
	}
	end := strings.IndexByte(rest, '}')
	tag := rest[1:end]
	fields := strings.SplitN(rest[end+2:], ":", 2)
	if len(fields) != 2 {
		t.Fatalf("key %q: no algorithm:period after the tag", key)
	}
	alg, period = fields[0], fields[1]
	escDomain, entries, _ := strings.Cut(tag, ":")
	domain, err := unescapePercent(escDomain)
	if err != nil {
		t.Fatalf("key %q: domain: %v", key, err)
	}
	rest, err = unescapePercent(entries)
	if err != nil {
		t.Fatalf("key %q: entries: %v", key, err)
	}
	for rest != "" {
		var p keyPart
		if p.shared = strings.HasPrefix(rest, "*"); p.shared {
			rest = rest[1:]
		}
		colon := strings.IndexByte(rest, ':')
		n, err := strconv.Atoi(rest[:colon])
		if err != nil || colon+1+n > len(rest) {
			t.Fatalf("key %q: bad length at %q", key, rest)
		}
		p.text = rest[colon+1 : colon+1+n]
		parts = append(parts, p)
		rest = rest[colon+1+n:]
		if rest != "" {
			if rest[0] != ':' {
				t.Fatalf("key %q: missing separator at %q", key, rest)
			}
			rest = rest[1:]
		}
	}
	return domain, alg, period, parts
}

func unescapePercent(s string) (string, error) {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			sb.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", strconv.ErrSyntax
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		sb.WriteByte(byte(v))
		i += 2
	}
	return sb.String(), nil
}

func FuzzKey(f *testing.F) {
	f.Add("rl:", "example", "user_id", "alice", "", "", false, false)
	f.Add("", "d", "a", "b_c", "a_b", "c", true, false)
	f.Add("{", "a{b}c", "k{", "}v", "{x}", "", true, true)
	f.Add("p}", "%7B", "1:", ":1", "*1:", "x", true, true)
	f.Add("", "{}", "", "", "", "", false, true)
	f.Fuzz(func(t *testing.T, prefix, domain, k1, v1, k2, v2 string, two, shared bool) {
		if domain == "" {
			domain = "d" // Parse refuses empty domains
		}
		rule := ruleFor(domain, algorithms.SlidingLog, 90*time.Second)
		entries := []Entry{{k1, v1}}
		if two {
			entries = append(entries, Entry{k2, v2})
		}
		if shared {
			rule.path = []level{{key: k1, value: "p*" + v1, kind: byWildcard, shared: true}}
		}
		b := KeyBuilder{Prefix: prefix}
		key := b.Key(rule, entries)

		// The whole tag is the counter's: it runs from the first '{' to
		// the last '}', so no entry can cut it short.
		tag, ok := clusterTag(key)
		if !ok {
			t.Fatalf("key %q has no usable hash tag", key)
		}
		if want := key[strings.IndexByte(key, '{')+1 : strings.LastIndexByte(key, '}')]; tag != want {
			t.Fatalf("tag %q of %q is not the whole braced part %q", tag, key, want)
		}
		// The prefix escapes to a fixed length, so the rest decodes.
		var sb strings.Builder
		writeEscaped(&sb, prefix, false)
		gotDomain, alg, period, parts := decodeKey(t, sb.Len(), key)
		if gotDomain != domain || alg != "sliding_log" || period != "90s" {
			t.Fatalf("key %q decodes to %q %q %q", key, gotDomain, alg, period)
		}
		want := []keyPart{{text: k1}, {text: v1, shared: false}}
		if shared {
			want[1] = keyPart{text: "p*" + v1, shared: true}
		}
		if two {
			want = append(want, keyPart{text: k2}, keyPart{text: v2})
		}
		if len(parts) != len(want) {
			t.Fatalf("key %q decodes to %d parts, want %d", key, len(parts), len(want))
		}
		for i := range want {
			if parts[i] != want[i] {
				t.Fatalf("key %q part %d = %+v, want %+v", key, i, parts[i], want[i])
			}
		}
	})
}
