package config

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// leaseYAML says lease, or not, in every way a rule can.
const leaseYAML = `
domain: d
descriptors:
  - key: unset
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: on
    lease: true
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_window}
  - key: off
    lease: false
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: yes
    lease: yes
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 5}
  - key: nulled
    lease: null
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: log
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_log}
  - key: logoff
    lease: false
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_log}
  - key: unlimited
    lease: false
    rate_limit: {unlimited: true}
  - key: several
    lease: true
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {unit: day, requests_per_unit: 1000, algorithm: token_bucket}
  - key: parent
    lease: true
    descriptors:
      - key: child
        rate_limit: {unit: second, requests_per_unit: 10}
`

var parseLeaseTests = []struct {
	key        string
	want       Lease
	leasesOff  bool // Leases(false): LEASE_ENABLED off
	leasesOn   bool // Leases(true)
	dumpSuffix string
}{
	{"unset", LeaseUnset, false, true, ""},
	{"on", LeaseOn, true, true, ", lease: true"},
	{"off", LeaseOff, false, false, ", lease: false"},
	{"yes", LeaseOn, true, true, ", lease: true"},
	{"nulled", LeaseUnset, false, true, ""},
	// LEASE_ENABLED leases only what can lease.
	{"log", LeaseUnset, false, false, ""},
	{"logoff", LeaseOff, false, false, ", lease: false"},
	{"unlimited", LeaseOff, false, false, ", lease: false"},
	{"several", LeaseOn, true, true, ", lease: true"},
}

func TestParseLease(t *testing.T) {
	c := parseOne(t, leaseYAML)
	dump := c.Dump()
	for _, tt := range parseLeaseTests {
		t.Run(tt.key, func(t *testing.T) {
			r := c.Match("d", []Entry{{tt.key, "x"}})
			if r == nil {
				t.Fatalf("no rule for %s", tt.key)
			}
			for i, l := range r.Limits() {
				if l.Lease != tt.want {
					t.Errorf("limit %d: Lease = %s, want %s", i, l.Lease, tt.want)
				}
				if got := l.Leases(false); got != tt.leasesOff {
					t.Errorf("limit %d: Leases(false) = %v, want %v", i, got, tt.leasesOff)
				}
				if got := l.Leases(true); got != tt.leasesOn {
					t.Errorf("limit %d: Leases(true) = %v, want %v", i, got, tt.leasesOn)
				}
			}
			for _, line := range strings.Split(dump, "\n") {
				if !strings.HasPrefix(line, "d."+tt.key+":") {
					continue
				}
				rest, _, _ := strings.Cut(line, " (f.yaml")
				if has := strings.HasSuffix(rest, tt.dumpSuffix); !has || (tt.dumpSuffix == "" && strings.Contains(rest, "lease")) {
					t.Errorf("Dump line %q, want it to end with %q", line, tt.dumpSuffix)
				}
			}
		})
	}
	// lease belongs to the node that says it, as shadow_mode does: a child
	// does not inherit it.
	if r := c.Match("d", []Entry{{"parent", "p"}, {"child", "c"}}); r == nil || r.Lease != LeaseUnset {
		t.Errorf("child rule %+v, want lease unset", r)
	}
}

func TestConfigLeases(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"no lease field", "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n", false},
		{"lease false", "domain: d\ndescriptors:\n  - {key: k, lease: false, rate_limit: {unit: second, requests_per_unit: 1}}\n", false},
		{"lease true", "domain: d\ndescriptors:\n  - {key: k, lease: true, rate_limit: {unit: second, requests_per_unit: 1}}\n", true},
		{"nested lease true", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - {key: k, lease: true, rate_limit: {unit: second, requests_per_unit: 1}}\n", true},
		{"lease true without a rule", "domain: d\ndescriptors:\n  - {key: k, lease: true}\n", false},
		{"empty", "domain: d\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseOne(t, tt.doc).Leases(); got != tt.want {
				t.Errorf("Leases() = %v, want %v", got, tt.want)
			}
		})
	}
	if (*Config)(nil).Leases() {
		t.Error("a nil Config leases")
	}
}

func TestLeasable(t *testing.T) {
	window := func(alg algorithms.Algorithm) algorithms.Limit {
		return algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
	}
	tb := window(algorithms.TokenBucket)
	stepped, debt := tb, tb
	stepped.RefillInterval = 100 * time.Millisecond
	debt.MaxDebt = 5
	burst := window(algorithms.GCRA)
	burst.Burst = 50
	zero := window(algorithms.FixedWindow)
	zero.Requests = 0
	tests := []struct {
		name string
		lim  algorithms.Limit
		want bool
	}{
		{"fixed_window", window(algorithms.FixedWindow), true},
		{"sliding_window", window(algorithms.SlidingWindow), true},
		{"gcra", window(algorithms.GCRA), true},
		{"gcra with burst", burst, true},
		{"leaky_bucket", window(algorithms.LeakyBucket), true},
		{"token_bucket", tb, true},
		{"sliding_log", window(algorithms.SlidingLog), false},
		{"token_bucket with refill_interval", stepped, false},
		{"token_bucket with max_debt", debt, false},
		{"zero limit", zero, false},
		{"invalid", algorithms.Limit{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaseRefusal(tt.lim) == nil; got != tt.want {
				t.Errorf("leaseRefusal(%+v) = %v, want leasable %v", tt.lim, leaseRefusal(tt.lim), tt.want)
			}
		})
	}
}

func TestParseLeaseBad(t *testing.T) {
	const why = " (lease: true at line 4; set lease: false or change the limit)"
	tests := []struct {
		name  string
		lease string // "" is true
		body  string // the descriptor's fields after key and lease
		want  []string
	}{
		{"sliding_log", "", "rate_limit: {unit: second, requests_per_unit: 10, algorithm: sliding_log}",
			[]string{"f.yaml:5: descriptors[0].rate_limit.algorithm: sliding_log cannot lease: it logs each hit at its admission time, and a hit admitted later from a block would leave the log early" + why}},
		{"stepped token_bucket", "", "rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, refill_interval: 100ms}",
			[]string{"f.yaml:5: descriptors[0].rate_limit.refill_interval: a token_bucket with refill_interval cannot lease"}},
		{"token_bucket with debt", "", "rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, max_debt: 3}",
			[]string{"f.yaml:5: descriptors[0].rate_limit.max_debt: a token_bucket with max_debt cannot lease"}},
		{"zero limit", "", "rate_limit: {unit: second, requests_per_unit: 0}",
			[]string{"f.yaml:5: descriptors[0].rate_limit.requests_per_unit: a zero limit cannot lease: it admits nothing to lease" + why}},
		{"no requests_per_unit", "", "rate_limit: {unit: second}",
			[]string{"f.yaml:5: descriptors[0].rate_limit: a zero limit cannot lease"}},
		{"unlimited", "", "rate_limit: {unlimited: true}",
			[]string{"f.yaml:5: descriptors[0].rate_limit.unlimited: an unlimited rule cannot lease: it never reaches the store" + why}},
		{"each limit of rate_limits", "", "rate_limits:\n      - {unit: second, requests_per_unit: 10}\n      - {unit: day, requests_per_unit: 1000, algorithm: sliding_log}\n      - {unit: day, requests_per_unit: 0}",
			[]string{
				"f.yaml:7: descriptors[0].rate_limits[1].algorithm: sliding_log cannot lease",
				"f.yaml:8: descriptors[0].rate_limits[2].requests_per_unit: a zero limit cannot lease",
			}},
		{"not a boolean", "sometimes", "rate_limit: {unit: second, requests_per_unit: 10}",
			[]string{`f.yaml:4: descriptors[0].lease: want true or false, got string "sometimes"`}},
		{"quoted", `"true"`, "rate_limit: {unit: second, requests_per_unit: 10}",
			[]string{`f.yaml:4: descriptors[0].lease: want true or false, got string "true"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease, want := tt.lease, tt.want
			if lease == "" {
				lease = "true"
			}
			doc := "domain: d\ndescriptors:\n  - key: k\n    lease: " + lease + "\n    " + tt.body + "\n"
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(doc)}})
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", want)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
				t.Errorf("%d errors, want %d:\n%v", n, len(want), err)
			}
		})
	}
}

// TestParseLeaseFalseAnywhere: lease: false, and lease: true on limits that
// can lease, load whatever the algorithm.
func TestParseLeaseFalseAnywhere(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, opts := range []string{"", ", refill_interval: 100ms", ", max_debt: 2"} {
			if opts != "" && !alg.Info().Stepped {
				continue
			}
			doc := "domain: d\ndescriptors:\n  - key: k\n    lease: false\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: " + alg.String() + opts + "}\n"
			if _, err := Parse([]File{{Name: "f.yaml", Data: []byte(doc)}}); err != nil {
				t.Errorf("%s%s with lease: false: %v", alg, opts, err)
			}
			lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
			if opts == ", refill_interval: 100ms" {
				lim.RefillInterval = 100 * time.Millisecond
			} else if opts != "" {
				lim.MaxDebt = 2
			}
			doc = strings.Replace(doc, "lease: false", "lease: true", 1)
			_, err := Parse([]File{{Name: "f.yaml", Data: []byte(doc)}})
			if (err == nil) != lease.Leasable(lim) {
				t.Errorf("%s%s with lease: true: %v, Leasable %v", alg, opts, err, lease.Leasable(lim))
			}
		}
	}
}
