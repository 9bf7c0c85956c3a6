package metrics_test

import (
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/envoystats"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
)

// counterSink adds up the counters each flush sends.
type counterSink struct {
	mu sync.Mutex
	c  map[string]uint64
}

func (s *counterSink) FlushCounter(name string, v uint64) {
	s.mu.Lock()
	s.c[name] += v
	s.mu.Unlock()
}
func (*counterSink) FlushGauge(string, uint64)  {}
func (*counterSink) FlushTimer(string, float64) {}

func parseRules(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]config.File{{Name: "t.yaml", Data: []byte(yaml)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const envoyRules = `
domain: d
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`

// TestEnvoyStatsFromHits: a Hit reaches envoyproxy's stats under its rule's
// key (the request's for detailed_metric), read as envoyproxy's limiter
// would: an uncharged decision's Remaining is the room before it, a
// charged one's the room after it, and one recorded past its limit says
// the room before it (RemainingBefore).
func TestEnvoyStatsFromHits(t *testing.T) {
	cfg := parseRules(t, envoyRules)
	plain := cfg.Match("d", []config.Entry{{Key: "plain", Value: "x"}})
	user := []config.Entry{{Key: "user", Value: "bob"}}
	detailed := cfg.Match("d", user)
	const p = "ratelimit.service.rate_limit."
	tests := []struct {
		name string
		hit  metrics.Hit
		want map[string]uint64
	}{
		{"admitted: remaining after the charge", metrics.Hit{Rule: plain, Hits: 3, Allowed: true, Charged: true, Capacity: 10, Remaining: 1},
			map[string]uint64{"d.plain.total_hits": 3, "d.plain.within_limit": 3, "d.plain.near_limit": 1}},
		{"fitted in a denied request: remaining before it", metrics.Hit{Rule: plain, Hits: 3, Allowed: true, Capacity: 10, Remaining: 4},
			map[string]uint64{"d.plain.total_hits": 3, "d.plain.within_limit": 3, "d.plain.near_limit": 1}},
		{"denied: the part past the limit", metrics.Hit{Rule: plain, Hits: 5, Capacity: 10, Remaining: 3},
			map[string]uint64{"d.plain.total_hits": 5, "d.plain.over_limit": 2, "d.plain.near_limit": 2}},
		{"recorded past the limit: the part past it", metrics.Hit{Rule: plain, Hits: 5, Usage: true, Charged: true, Capacity: 10, RemainingBefore: 3},
			map[string]uint64{"d.plain.total_hits": 5, "d.plain.over_limit": 2, "d.plain.near_limit": 2}},
		{"recorded with nothing left before: all past it", metrics.Hit{Rule: plain, Hits: 5, Usage: true, Charged: true, Capacity: 10},
			map[string]uint64{"d.plain.total_hits": 5, "d.plain.over_limit": 5}},
		{"shadow_mode rule recorded across its limit", metrics.Hit{Rule: plain, Hits: 4, Shadow: true, RuleShadow: true, Charged: true, Capacity: 10, RemainingBefore: 3},
			map[string]uint64{"d.plain.total_hits": 4, "d.plain.over_limit": 1, "d.plain.near_limit": 2, "d.plain.shadow_mode": 1}},
		{"shadow_mode rule", metrics.Hit{Rule: plain, Hits: 1, Shadow: true, RuleShadow: true, Capacity: 10},
			map[string]uint64{"d.plain.total_hits": 1, "d.plain.over_limit": 1, "d.plain.shadow_mode": 1}},
		{"global SHADOW_MODE alone is no shadow_mode stat", metrics.Hit{Rule: plain, Hits: 1, Shadow: true, Capacity: 10},
			map[string]uint64{"d.plain.total_hits": 1, "d.plain.over_limit": 1}},
		{"local cache", metrics.Hit{Rule: plain, Hits: 2, FromCache: true, Capacity: 10},
			map[string]uint64{"d.plain.total_hits": 2, "d.plain.over_limit": 2, "d.plain.over_limit_with_local_cache": 2}},
		{"detailed_metric", metrics.Hit{Rule: detailed, Entries: user, Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 9},
			map[string]uint64{"d.user_bob.total_hits": 1, "d.user_bob.within_limit": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &counterSink{c: map[string]uint64{}}
			es := envoystats.New(sink)
			m := metrics.New(metrics.WithEnvoyStats(es))
			m.Observe(tt.hit)
			es.Flush()
			want := map[string]uint64{}
			for k, v := range tt.want {
				want[p+k] = v
			}
			if !maps.Equal(sink.c, want) {
				t.Errorf("flushed %v\nwant    %v", sink.c, want)
			}
		})
	}
}

// TestObserveAllocatesNothing: once a rule's counters exist, counting a
// decision builds nothing, detailed_metric keys included.
func TestObserveAllocatesNothing(t *testing.T) {
	cfg := parseRules(t, envoyRules)
	m := metrics.New(metrics.WithEnvoyStats(envoystats.New(&counterSink{c: map[string]uint64{}})))
	user := []config.Entry{{Key: "user", Value: "bob"}}
	for name, hit := range map[string]metrics.Hit{
		"plain":    {Rule: cfg.Match("d", []config.Entry{{Key: "plain", Value: "x"}}), Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5},
		"detailed": {Rule: cfg.Match("d", user), Entries: user, Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 5},
	} {
		m.Observe(hit)
		if n := testing.AllocsPerRun(100, func() { m.Observe(hit) }); n != 0 {
			t.Errorf("%s: %v allocations per Observe, want 0", name, n)
		}
	}
}

// TestDetailedCapCoversEnvoyStats: past MAX_DETAILED_METRIC_SERIES new
// values count under <key>_overflow in envoyproxy's stats too.
func TestDetailedCapCoversEnvoyStats(t *testing.T) {
	cfg := parseRules(t, envoyRules)
	sink := &counterSink{c: map[string]uint64{}}
	es := envoystats.New(sink)
	m := metrics.New(metrics.WithEnvoyStats(es), metrics.WithMaxDetailedSeries(2))
	for _, v := range []string{"a", "b", "c", "d", "a"} {
		e := []config.Entry{{Key: "user", Value: v}}
		m.Observe(metrics.Hit{Rule: cfg.Match("d", e), Entries: e, Hits: 1, Allowed: true, Charged: true, Capacity: 10, Remaining: 9})
	}
	es.Flush()
	var keys []string
	for k := range sink.c {
		if strings.HasSuffix(k, ".total_hits") {
			keys = append(keys, k+"="+strings.Repeat("|", int(sink.c[k])))
		}
	}
	want := map[string]uint64{
		"ratelimit.service.rate_limit.d.user_a.total_hits":        2,
		"ratelimit.service.rate_limit.d.user_b.total_hits":        1,
		"ratelimit.service.rate_limit.d.user_overflow.total_hits": 2,
	}
	for k, v := range want {
		if sink.c[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, sink.c[k], v, keys)
		}
	}
}

// TestRuleLimits: every limited rule in force has its limit and window.
func TestRuleLimits(t *testing.T) {
	cfg := parseRules(t, envoyRules+`
  - key: two
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: hour, requests_per_unit: 1000}
  - key: free
    rate_limit: {unlimited: true}
`)
	m := metrics.New()
	if err := m.WatchRules(func() *config.Config { return cfg }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP ratelimitd_rule_limit Requests (hits) a rule admits per window, by stats key and place in rate_limits.
# TYPE ratelimitd_rule_limit gauge
ratelimitd_rule_limit{domain="d",limit_index="0",rule="d.plain"} 10
ratelimitd_rule_limit{domain="d",limit_index="0",rule="d.two"} 100
ratelimitd_rule_limit{domain="d",limit_index="0",rule="d.user"} 10
ratelimitd_rule_limit{domain="d",limit_index="1",rule="d.two"} 1000
# HELP ratelimitd_rule_window_seconds A rule's window (period) in seconds.
# TYPE ratelimitd_rule_window_seconds gauge
ratelimitd_rule_window_seconds{domain="d",limit_index="0",rule="d.plain"} 1
ratelimitd_rule_window_seconds{domain="d",limit_index="0",rule="d.two"} 60
ratelimitd_rule_window_seconds{domain="d",limit_index="0",rule="d.user"} 1
ratelimitd_rule_window_seconds{domain="d",limit_index="1",rule="d.two"} 3600
`
	if err := testutilGatherAndCompare(m, want, "ratelimitd_rule_limit", "ratelimitd_rule_window_seconds"); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRules(func() *config.Config { return nil }); err == nil {
		t.Error("a second WatchRules registered")
	}
}

func testutilGatherAndCompare(m *metrics.Metrics, want string, names ...string) error {
	return testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...)
}
