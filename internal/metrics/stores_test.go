package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// TestStoreMetrics drives a real embedded store behind a real local cache
// and reads their counters back from the registry.
func TestStoreMetrics(t *testing.T) {
	full := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Minute}
	tests := []struct {
		name string
		keys int // distinct keys charged once each
		deny int // then requests over full's limit on key "k0"
		want map[string]float64
	}{
		{"nothing taken", 0, 0, map[string]float64{
			"ratelimitd_memstore_keys": 0, "ratelimitd_memstore_evictions_total": 0, "ratelimitd_memstore_expired_total": 0,
			"ratelimitd_local_cache_hits_total": 0, "ratelimitd_local_cache_misses_total": 0, "ratelimitd_local_cache_evictions_total": 0,
		}},
		{"keys past MEMORY_MAX_KEYS are evicted", 5, 0, map[string]float64{
			"ratelimitd_memstore_keys": 3, "ratelimitd_memstore_evictions_total": 2,
			"ratelimitd_local_cache_misses_total": 5,
		}},
		{"repeated denials are answered by the cache", 1, 3, map[string]float64{
			"ratelimitd_memstore_keys": 1, "ratelimitd_memstore_evictions_total": 0,
			// The first denial reaches the store and is learned.
			"ratelimitd_local_cache_hits_total": 2, "ratelimitd_local_cache_misses_total": 2,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memstore.New(memstore.WithMaxKeys(3), memstore.WithSweep(0, 0))
			cache := localcache.New(mem, 1<<20)
			t.Cleanup(func() { _ = cache.Close() })
			m := metrics.New()
			if err := m.AddMemStore(mem); err != nil {
				t.Fatal(err)
			}
			if err := m.AddLocalCache(cache); err != nil {
				t.Fatal(err)
			}
			take := func(key string) {
				if _, err := cache.Take(context.Background(), []store.Request{{Key: key, Limit: full, Hits: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.keys {
				take(fmt.Sprintf("k%d", i))
			}
			for range tt.deny {
				take("k0")
			}
			got := gathered(t, m)
			for name, want := range tt.want {
				if v, ok := got[name]; !ok || v != want {
					t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
				}
			}
		})
	}
}

func TestAddingAStoreTwiceFails(t *testing.T) {
	mem := memstore.New(memstore.WithSweep(0, 0))
	t.Cleanup(func() { _ = mem.Close() })
	m := metrics.New()
	if err := m.AddMemStore(mem); err != nil {
		t.Fatal(err)
	}
	if err := m.AddMemStore(mem); err == nil {
		t.Fatal("a second AddMemStore registered duplicate collectors")
	}
	if got := gathered(t, m)["ratelimitd_memstore_keys"]; got != 0 {
		t.Fatalf("keys = %v after the failed add", got)
	}
}

// gathered maps every unlabelled counter and gauge to its value.
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			if len(metric.GetLabel()) > 0 {
				continue
			}
			switch {
			case metric.GetCounter() != nil:
				out[f.GetName()] = metric.GetCounter().GetValue()
			case metric.GetGauge() != nil:
				out[f.GetName()] = metric.GetGauge().GetValue()
			}
		}
	}
	return out
}
