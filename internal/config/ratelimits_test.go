package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const twoLimits = `
domain: d
descriptors:
  - key: user
    quota_mode: true
    metadata: {tier: free}
    rate_limits:
      - {unit: second, requests_per_unit: 10, name: per_second}
      - {unit: day, requests_per_unit: 1000, name: per_day, algorithm: sliding_window}
      - {unit: second, requests_per_unit: 20}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 10}
`

func TestParseRateLimits(t *testing.T) {
	c := parseOne(t, twoLimits)
	r := c.Match("d", []Entry{{"user", "alice"}})
	if r == nil {
		t.Fatalf("no rule\n%s", c.Dump())
	}
	limits := r.Limits()
	if len(limits) != 3 || limits[0] != r {
		t.Fatalf("Limits() = %d rules (first %p, matched %p), want 3 starting with the matched one", len(limits), limits[0], r)
	}
	want := []struct {
		name string
		lim  algorithms.Limit
	}{
		{"per_second", fixed(10, time.Second)},
		{"per_day", algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1000, Period: 24 * time.Hour}},
		{"", fixed(20, time.Second)},
	}
	keys := map[string]int{}
	kb := KeyBuilder{Prefix: "rl:"}
	for i, l := range limits {
		if l.Name != want[i].name || l.Limit != want[i].lim || l.Index != i {
			t.Errorf("limit %d: name %q limit %+v index %d, want %q %+v %d", i, l.Name, l.Limit, l.Index, want[i].name, want[i].lim, i)
		}
		// Descriptor-level fields are every limit's.
		if !l.QuotaMode || l.StatKey != "d.user" || l.Metadata["tier"] != "free" || l.Source == "" {
			t.Errorf("limit %d lacks the descriptor's fields: %+v", i, withoutPath(l))
		}
		key := kb.Key(l, []Entry{{"user", "alice"}})
		if j, dup := keys[key]; dup {
			t.Errorf("limits %d and %d share key %q", j, i, key)
		}
		keys[key] = i
		tag, _ := clusterTag(key)
		if first, _ := clusterTag(kb.Key(limits[0], []Entry{{"user", "alice"}})); tag != first {
			t.Errorf("limit %d hash tag %q, want the descriptor's %q (one Cluster slot)", i, tag, first)
		}
	}
	// The first limit keeps the key a rate_limit of the same shape has.
	plain := c.Match("d", []Entry{{"plain", "alice"}})
	if got, want := kb.Key(limits[0], []Entry{{"user", "alice"}}), strings.Replace(kb.Key(plain, []Entry{{"plain", "alice"}}), "5:plain", "4:user", 1); got != want {
		t.Errorf("first limit key %q, want %q", got, want)
	}
	if got := kb.Key(limits[2], []Entry{{"user", "alice"}}); !strings.HasSuffix(got, "}:fixed_window.int:1s:2") {
		t.Errorf("third limit key %q, want the index after the period", got)
	}
	if n := c.CountRules("d"); n != 4 {
		t.Errorf("CountRules = %d, want 4 (3 limits + 1 rule)", n)
	}
	if dump := c.Dump(); strings.Count(dump, "d.user:") != 3 || !strings.Contains(dump, "limit=2/3") {
		t.Errorf("Dump shows every limit on its own line:\n%s", dump)
	}
}

func TestParseRateLimitsBad(t *testing.T) {
	head := "domain: d\ndescriptors:\n  - key: a\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"both rate_limit and rate_limits", head + "    rate_limit: {unit: second}\n    rate_limits: [{unit: second}]\n",
			"f.yaml:5: descriptors[0].rate_limits: must not be set together with rate_limit"},
		{"empty list", head + "    rate_limits: []\n", "f.yaml:4: descriptors[0].rate_limits: empty"},
		{"not a list", head + "    rate_limits: {unit: second}\n", "f.yaml:4: descriptors[0].rate_limits: want a list"},
		{"unlimited item", head + "    rate_limits:\n      - {unlimited: true}\n",
			`f.yaml:5: descriptors[0].rate_limits[0].unlimited: unknown key "unlimited"`},
		{"item without unit", head + "    rate_limits:\n      - {unit: second}\n      - {requests_per_unit: 5}\n",
			"f.yaml:6: descriptors[0].rate_limits[1].unit: missing"},
		{"unknown key in an item", head + "    rate_limits:\n      - {unit: second, burts: 3}\n",
			`f.yaml:5: descriptors[0].rate_limits[0].burts: unknown key`},
		{"burst on a window", head + "    rate_limits:\n      - {unit: second, burst: 3}\n",
			"descriptors[0].rate_limits[0].burst: applies to token_bucket"},
		{"duplicate name", head + "    rate_limits:\n      - {unit: second, name: x}\n      - {unit: day, name: x}\n",
			`f.yaml:6: descriptors[0].rate_limits[1].name: duplicate name "x" (also descriptors[0].rate_limits[0])`},
		{"replaces a sibling", head + "    rate_limits:\n      - {unit: second, name: x}\n      - {unit: day, replaces: [{name: x}]}\n",
			`f.yaml:6: descriptors[0].rate_limits[1].replaces[0].name: "x" is descriptors[0].rate_limits[0]`},
		{"replaces itself", head + "    rate_limits:\n      - {unit: second, name: x, replaces: [{name: x}]}\n",
			`descriptors[0].rate_limits[0].replaces[0].name: a rule cannot replace itself`},
		{"too many", head + "    rate_limits:\n" + strings.Repeat("      - {unit: second}\n", MaxLimits+1),
			fmt.Sprintf("f.yaml:4: descriptors[0].rate_limits: %d limits, at most %d", MaxLimits+1, MaxLimits)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(tt.yaml)}})
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nlacks %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Errorf("error %v is not a located *Error", err)
			}
		})
	}
}

// A null rate_limits is absent, as null is everywhere in the format.
func TestParseRateLimitsNull(t *testing.T) {
	c := parseOne(t, "domain: d\ndescriptors:\n  - key: a\n    rate_limits: null\n    rate_limit: {unit: second, requests_per_unit: 3}\n")
	if r := c.Match("d", []Entry{{"a", "x"}}); r == nil || len(r.Limits()) != 1 || r.RequestsPerUnit != 3 {
		t.Fatalf("Match = %+v, want the rate_limit alone", r)
	}
}
