package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestLeaseMetrics drives a real lease decorator over the embedded store on
// a fake clock and reads its counters back from the registry.
func TestLeaseMetrics(t *testing.T) {
	window := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100000, Period: time.Hour}
	bucket := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 100000, Period: time.Hour}
	tests := []struct {
		name string
		lim  algorithms.Limit
		hits int           // single hits, 1 ms apart
		idle time.Duration // then the clock moves this far and the sweeper runs
		// want: each metric's value, or -1 for "above 0".
		want map[string]float64
	}{
		{"nothing taken", window, 0, 0, map[string]float64{
			"ratelimitd_lease_blocks_total": 0, "ratelimitd_lease_local_hits_total": 0, "ratelimitd_lease_returned_hits_total": 0,
			"ratelimitd_lease_lapsed_hits_total": 0, "ratelimitd_lease_return_errors_total": 0, "ratelimitd_lease_outstanding_hits": 0,
		}},
		{"a hot window counter is answered from its blocks", window, 200, 0, map[string]float64{
			"ratelimitd_lease_blocks_total": -1, "ratelimitd_lease_local_hits_total": -1, "ratelimitd_lease_outstanding_hits": -1,
			"ratelimitd_lease_returned_hits_total": 0,
		}},
		{"an idle window lease returns its rest", window, 200, time.Minute, map[string]float64{
			"ratelimitd_lease_blocks_total": -1, "ratelimitd_lease_local_hits_total": -1, "ratelimitd_lease_returned_hits_total": -1,
			"ratelimitd_lease_outstanding_hits": 0, "ratelimitd_lease_return_errors_total": 0,
		}},
		{"an idle bucket lease lapses", bucket, 200, time.Minute, map[string]float64{
			"ratelimitd_lease_blocks_total": -1, "ratelimitd_lease_local_hits_total": -1, "ratelimitd_lease_returned_hits_total": 0,
			"ratelimitd_lease_lapsed_hits_total": -1, "ratelimitd_lease_outstanding_hits": 0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
			ls := lease.New(mem, lease.WithClock(clock.Now), lease.WithSweep(0))
			t.Cleanup(func() { _ = ls.Close() })
			m := metrics.New()
			if err := m.AddLeases(ls); err != nil {
				t.Fatal(err)
			}
			op := []store.Request{{Key: "k", Limit: tt.lim, Hits: 1, Mode: algorithms.Enforce, Lease: true}}
			for range tt.hits {
				if res, err := ls.Take(context.Background(), op); err != nil || !res[0].Allowed {
					t.Fatalf("take: %+v, %v", res, err)
				}
				clock.Advance(time.Millisecond)
			}
			if tt.idle > 0 {
				clock.Advance(tt.idle)
				if err := ls.Sweep(clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
			got := gathered(t, m)
			for name, want := range tt.want {
				v, ok := got[name]
				if !ok || (want >= 0 && v != want) || (want < 0 && v <= 0) {
					t.Errorf("%s = %v (exported %v), want %v (-1: above 0)", name, v, ok, want)
				}
			}
		})
	}
}

func TestAddingLeasesTwiceFails(t *testing.T) {
	ls := lease.New(memstore.New(memstore.WithSweep(0, 0)), lease.WithSweep(0))
	t.Cleanup(func() { _ = ls.Close() })
	m := metrics.New()
	if err := m.AddLeases(ls); err != nil {
		t.Fatal(err)
	}
	if err := m.AddLeases(ls); err == nil {
		t.Fatal("a second AddLeases registered duplicate collectors")
	}
}

// countingLeases counts the Stats calls made of a real lease store.
type countingLeases struct {
	*lease.Store
	calls int
}

func (c *countingLeases) Stats() lease.Stats {
	c.calls++
	return c.Store.Stats()
}

// A scrape reads the lease counters with one Stats call (each takes all 64
// shard locks), however many lease metrics it exports.
func TestLeaseScrapeCallsStatsOnce(t *testing.T) {
	ls := lease.New(memstore.New(memstore.WithSweep(0, 0)), lease.WithSweep(0))
	t.Cleanup(func() { _ = ls.Close() })
	c := &countingLeases{Store: ls}
	m := metrics.New()
	if err := m.AddLeases(c); err != nil {
		t.Fatal(err)
	}
	for scrape := 1; scrape <= 3; scrape++ {
		got := gathered(t, m)
		if c.calls != scrape {
			t.Fatalf("after %d scrapes Stats was called %d times, want %d", scrape, c.calls, scrape)
		}
		n := 0
		for name := range got {
			if strings.HasPrefix(name, "ratelimitd_lease_") {
				n++
			}
		}
		if n != 7 {
			t.Fatalf("scrape exported %d lease metrics, want 7: %v", n, got)
		}
	}
}
