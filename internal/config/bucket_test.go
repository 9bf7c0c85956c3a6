package config

import (
	"slices"
	"testing"
)

// bucketConfig nests keys in an order that is neither the bucket's nor
// sorted (tenant before path), with values, wildcards, a regex and a
// shared wildcard.
const bucketConfig = `
domain: d
descriptors:
  - key: tenant
    descriptors:
      - key: path
        value: /api/*
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    value: acme
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    value_regex: 'u[0-9]+'
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: zone
    descriptors:
      - key: tenant
        rate_limit: {unit: minute, requests_per_unit: 6}
`

func TestMatchBucket(t *testing.T) {
	c := parseOne(t, bucketConfig)
	tests := []struct {
		name   string
		domain string
		bucket map[string]string
		want   uint32  // requests_per_unit; 0 = no rule
		order  []Entry // entries in matched order
	}{
		{"the tree orders the keys", "d", map[string]string{"path": "/api/v1", "tenant": "t1"}, 1,
			[]Entry{{"tenant", "t1"}, {"path", "/api/v1"}}},
		{"key alone below a wildcard sibling", "d", map[string]string{"path": "/x", "tenant": "t1"}, 2,
			[]Entry{{"tenant", "t1"}, {"path", "/x"}}},
		{"exact value at the top", "d", map[string]string{"tenant": "acme"}, 3, []Entry{{"tenant", "acme"}}},
		{"regex value", "d", map[string]string{"user": "u42"}, 4, []Entry{{"user", "u42"}}},
		{"regex that does not match", "d", map[string]string{"user": "bob"}, 0, nil},
		{"shared wildcard", "d", map[string]string{"path": "/files/a"}, 5, []Entry{{"path", "/files/a"}}},
		// tenant starts an earlier descriptor than zone: the walk takes
		// it first and does not backtrack to zone's tree.
		{"first descriptor in file order wins", "d", map[string]string{"zone": "eu", "tenant": "t1"}, 0, nil},
		{"a key the tree never reaches", "d", map[string]string{"tenant": "t1", "path": "/x", "extra": "1"}, 0, nil},
		{"a node without a rule", "d", map[string]string{"tenant": "t1"}, 0, nil},
		{"unknown domain", "other", map[string]string{"tenant": "acme"}, 0, nil},
		{"empty bucket", "d", map[string]string{}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, entries := c.MatchBucket(tt.domain, tt.bucket)
			switch {
			case tt.want == 0 && r != nil:
				t.Fatalf("MatchBucket = %s, want none", r.StatKey)
			case tt.want != 0 && r == nil:
				t.Fatalf("MatchBucket = nil, want rule %d", tt.want)
			case tt.want != 0 && r.RequestsPerUnit != tt.want:
				t.Fatalf("MatchBucket = %s (%d), want rule %d", r.StatKey, r.RequestsPerUnit, tt.want)
			}
			if !slices.Equal(entries, tt.order) {
				t.Errorf("entries %v, want %v", entries, tt.order)
			}
			if r != nil && c.Match(tt.domain, entries) != r {
				t.Errorf("Match(%v) finds another rule than MatchBucket", entries)
			}
		})
	}
}

// TestMatchBucketSharesCounters: a bucket and the request descriptor with
// its entries in matched order name one counter.
func TestMatchBucketSharesCounters(t *testing.T) {
	c := parseOne(t, bucketConfig)
	kb := KeyBuilder{Prefix: "rl"}
	r, entries := c.MatchBucket("d", map[string]string{"path": "/files/b"})
	if r == nil {
		t.Fatal("no rule")
	}
	other, _ := c.MatchBucket("d", map[string]string{"path": "/files/c"})
	if kb.Key(r, entries) != kb.Key(other, []Entry{{"path", "/files/c"}}) {
		t.Errorf("share_threshold: /files/b and /files/c have different counters")
	}
	if got, want := kb.Key(r, entries), kb.Key(c.Match("d", []Entry{{"path", "/files/b"}}), []Entry{{"path", "/files/b"}}); got != want {
		t.Errorf("bucket key %q, descriptor key %q", got, want)
	}
}
