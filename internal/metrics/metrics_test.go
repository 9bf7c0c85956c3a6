package metrics_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
)

func TestObserve(t *testing.T) {
	tests := []struct {
		name string
		hit  metrics.Hit
		want map[string]float64 // metric name -> value for {domain=d, rule=r}
	}{
		{"admitted far from the limit",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 2, Allowed: true, Capacity: 10, Remaining: 8},
			map[string]float64{"total_hits": 2, "within_limit": 2, "near_limit": 0, "over_limit": 0}},
		{"admitted past 80%: only the hits beyond the threshold are near",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 3, Allowed: true, Capacity: 10, Remaining: 1},
			map[string]float64{"total_hits": 3, "within_limit": 3, "near_limit": 1}},
		{"denied",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 4, Capacity: 10},
			map[string]float64{"total_hits": 4, "over_limit": 4, "within_limit": 0, "shadow_mode": 0}},
		{"denied in shadow mode",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 1, Shadow: true, Capacity: 10},
			map[string]float64{"over_limit": 1, "shadow_mode": 1}},
		{"denied by the local cache",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 1, FromCache: true, Capacity: 10},
			map[string]float64{"over_limit": 1, "over_limit_with_local_cache": 1}},
		{"usage recorded past the limit",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 200, Usage: true, Capacity: 1000},
			map[string]float64{"total_hits": 200, "over_limit": 200, "usage_over_limit": 200}},
		{"usage within the limit",
			metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 900, Allowed: true, Usage: true, Capacity: 1000, Remaining: 100},
			map[string]float64{"within_limit": 900, "usage_over_limit": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			m.Observe(tt.hit)
			for name, want := range tt.want {
				if got := counter(t, m, name, "d", "r"); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func counter(t *testing.T, m *metrics.Metrics, name, domain, rule string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "ratelimitd_"+name+"_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["domain"] == domain && labels["rule"] == rule {
				return metric.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestDetailedSeriesAreCapped(t *testing.T) {
	m := metrics.New(metrics.WithMaxDetailedSeries(10))
	for i := range 1000 {
		v := strconv.Itoa(i)
		m.Observe(metrics.Hit{Domain: "d", StatKey: "d.user", MetricKey: "d.user_" + v, Hits: 1, Allowed: true, Capacity: 100, Remaining: 99})
	}
	n := testutil.CollectAndCount(m.Registry(), "ratelimitd_total_hits_total")
	if n != 11 {
		t.Fatalf("%d series for 1000 unique values with a cap of 10, want 11 (10 + overflow)", n)
	}
	if got := counter(t, m, "total_hits", "d", "d.user_overflow"); got != 990 {
		t.Fatalf("overflow series counted %v hits, want 990", got)
	}
	// Plain rules are never capped.
	for i := range 50 {
		k := "d.rule" + strconv.Itoa(i)
		m.Observe(metrics.Hit{Domain: "d", StatKey: k, MetricKey: k, Hits: 1, Allowed: true, Capacity: 1, Remaining: 0})
	}
	if n := testutil.CollectAndCount(m.Registry(), "ratelimitd_total_hits_total"); n != 61 {
		t.Fatalf("%d series, want 61", n)
	}
}

func TestOperationalMetrics(t *testing.T) {
	m := metrics.New()
	m.ConfigLoad(nil)
	m.ConfigLoad(errors.New("bad"))
	m.BackendError("unavailable")
	m.StoreErrorAnswer("allow")
	m.StoreErrorAnswer("allow")
	m.StoreErrorAnswer("deny")
	m.Request("OK", 300*time.Microsecond)
	m.RoundTrip(2*time.Millisecond, nil)
	want := `
# HELP ratelimitd_config_load_total Config loads by result (success, error); a failed load keeps the previous config.
# TYPE ratelimitd_config_load_total counter
ratelimitd_config_load_total{result="error"} 1
ratelimitd_config_load_total{result="success"} 1
# HELP ratelimitd_backend_errors_total Decisions the backend could not make, by kind (unavailable, deadline, canceled).
# TYPE ratelimitd_backend_errors_total counter
ratelimitd_backend_errors_total{kind="unavailable"} 1
# HELP ratelimitd_store_error_answers_total Requests the backend failed to decide that their rules' on_store_error answered, by answer (allow: OK, deny: OVER_LIMIT).
# TYPE ratelimitd_store_error_answers_total counter
ratelimitd_store_error_answers_total{answer="allow"} 2
ratelimitd_store_error_answers_total{answer="deny"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"ratelimitd_config_load_total", "ratelimitd_backend_errors_total", "ratelimitd_store_error_answers_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "ratelimitd_should_rate_limit_duration_seconds", "ratelimitd_redis_round_trip_seconds"); n != 2 {
		t.Fatalf("histogram series = %d, want 2", n)
	}
}

func TestInvalidUTF8ValueDoesNotPanic(t *testing.T) {
	m := metrics.New()
	m.Observe(metrics.Hit{Domain: "d", StatKey: "d.user", MetricKey: "d.user_\xff", Hits: 1, Allowed: true, Capacity: 10, Remaining: 9})
	if got := counter(t, m, "total_hits", "d", "d.user_\uFFFD"); got != 1 {
		t.Fatalf("total_hits{rule=\"d.user_\\uFFFD\"} = %v, want 1", got)
	}
}

// TestRegister: an embedding program's registry gets the service's
// collectors and no Go or process collectors (it usually has its own); a
// second Register on the same registry fails and leaves it as it was.
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.Register(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(metrics.Hit{Domain: "d", StatKey: "r", MetricKey: "r", Hits: 1, Allowed: true, Capacity: 10, Remaining: 9})
	if got := counterValue(t, reg, "ratelimitd_within_limit_total"); got != 1 {
		t.Errorf("within_limit = %v, want 1", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "ratelimitd_") {
			t.Errorf("Register added %s, not the service's own", f.GetName())
		}
	}
	if _, err := metrics.Register(reg); err == nil {
		t.Fatal("a second Register on the same registry succeeded")
	}
	after, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(families) {
		t.Errorf("failed Register left %d families, want %d", len(after), len(families))
	}
}

// counterValue reads the one series of the counter name on reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no single series %s", name)
	return 0
}
