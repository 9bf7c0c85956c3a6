package ratelimit_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func TestServiceFeedsMetrics(t *testing.T) {
	m := metrics.New(metrics.WithMaxDetailedSeries(2))
	f := newFixture(t, testConfig+`  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
`, ratelimit.WithObserver(m))
	for range 3 { // per_minute allows 2
		f.call(t, request("test", desc("per_minute", "")))
	}
	f.call(t, request("test", desc("shadow", "")))
	f.call(t, request("test", desc("shadow", "")))
	for _, u := range []string{"a", "b", "c", "d"} {
		f.call(t, request("test", desc("user", u)))
	}
	for _, c := range []struct {
		metric, rule string
		want         float64
	}{
		{"ratelimitd_total_hits_total", "test.per_minute", 3},
		{"ratelimitd_within_limit_total", "test.per_minute", 2},
		{"ratelimitd_near_limit_total", "test.per_minute", 1},
		{"ratelimitd_over_limit_total", "test.per_minute", 1},
		{"ratelimitd_shadow_mode_total", "test.shadow", 1},
		{"ratelimitd_total_hits_total", "test.user_a", 1},
		{"ratelimitd_total_hits_total", "test.user_overflow", 2},
	} {
		got := valueOf(t, m, c.metric, c.rule)
		if got != c.want {
			t.Errorf("%s{rule=%q} = %v, want %v", c.metric, c.rule, got, c.want)
		}
	}

	// A backend failure is counted by kind, and the request's latency by code.
	fs := &fakeStore{fn: func(context.Context, []store.Request) ([]store.Result, error) { return nil, context.DeadlineExceeded }}
	svc := ratelimit.New(staticConfig{parse(t, testConfig)}, fs, ratelimit.WithObserver(m))
	if _, err := svc.ShouldRateLimit(context.Background(), request("test", desc("big", ""))); err == nil {
		t.Fatal("want an error")
	}
	if n := testutil.CollectAndCount(m.Registry(), "ratelimitd_backend_errors_total"); n != 1 {
		t.Fatalf("backend error series = %d", n)
	}
	if n := testutil.CollectAndCount(m.Registry(), "ratelimitd_should_rate_limit_duration_seconds"); n != 2 {
		t.Fatalf("latency series by code = %d, want OK and Unavailable", n)
	}
}

func valueOf(t *testing.T, m *metrics.Metrics, name, rule string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					return metric.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
