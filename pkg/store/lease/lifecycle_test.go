package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// The sweeper starts with the first batch that leases, never with one that
// does not, and never once the store is stopped: a config reload after
// shutdown, or a late request, starts nothing nobody would stop.
func TestSweeperStartsWithTheFirstLease(t *testing.T) {
	lim := fixed(1000, time.Hour)
	plain := []store.Request{{Key: "k", Limit: lim, Hits: 1}}
	leased := []store.Request{hit("k", lim, 1)}
	tests := []struct {
		name      string
		stopFirst bool
		batches   [][]store.Request
		want      bool
	}{
		{"no batch", false, nil, false},
		{"batches that do not lease", false, [][]store.Request{plain, plain}, false},
		{"a batch that leases", false, [][]store.Request{plain, leased}, true},
		{"a batch that leases after Stop", true, [][]store.Request{leased, leased}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memstore.New(memstore.WithSweep(0, 0))
			t.Cleanup(func() { _ = mem.Close() })
			s := lease.New(shared{mem}, lease.WithSweep(10*time.Millisecond))
			if tt.stopFirst {
				if err := s.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			for _, reqs := range tt.batches {
				res, err := s.Take(context.Background(), reqs)
				if err != nil || !res[0].Allowed {
					t.Fatalf("take: %+v, %v", res, err)
				}
			}
			if got := s.Sweeping(); got != tt.want {
				t.Errorf("sweeper started: %v, want %v", got, tt.want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if tt.stopFirst && s.Stats().Outstanding != 0 {
				t.Errorf("a stopped store holds %d hits", s.Stats().Outstanding)
			}
		})
	}
}

// SetRules ends every lease when the fingerprint of the rules in force
// changes, and only then.
func TestSetRules(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Hour)
	steps := []struct {
		rules    string
		returned bool
	}{
		{"v1", false}, // the first rules: only recorded
		{"v1", false}, // a reload that changed nothing keeps the leases
		{"v2", true},
		{"v2", false},
		{"v1", true},
	}
	for i, step := range steps {
		r.clock.Advance(time.Second)
		r.warm("k", lim, time.Millisecond)
		before := r.s.Stats()
		if before.Outstanding == 0 {
			r.take(hit("k", lim, 1)) // tops the lease up
		}
		held := r.s.Stats().Outstanding
		if err := r.s.SetRules(context.Background(), step.rules); err != nil {
			t.Fatal(err)
		}
		st := r.s.Stats()
		returned := st.Returned > before.Returned
		if returned != step.returned || (returned && st.Outstanding != 0) || (!returned && st.Outstanding != held) {
			t.Fatalf("step %d (%s): returned %v, stats %+v, %d held before; want returned %v", i, step.rules, returned, st, held, step.returned)
		}
	}
}

// After Stop a warm counter's requests pass to the backend charging their
// own hits only: a block taken then could never be used (a stopped store
// holds none), and would stay charged, denying hits below the limit.
func TestNoBlockAfterStop(t *testing.T) {
	for _, lim := range append(leasing(windowLease, 1000, time.Hour), leasing(bucketLease, 1000, time.Hour)...) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			r := newRig(t)
			r.clock.Advance(time.Second)
			r.steady("k", lim, time.Millisecond, 200, r.sweep)
			if err := r.s.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			blocks := r.s.Stats().Blocks
			for i := range 20 {
				r.clock.Advance(time.Millisecond)
				if _, local := r.local(hit("k", lim, 1)); local {
					t.Fatalf("hit %d after Stop answered from a lease", i)
				}
			}
			if spares, _ := r.rec.spares(); r.s.Stats().Blocks != blocks {
				t.Errorf("%d blocks taken after Stop (%d Spare ops in all), want none", r.s.Stats().Blocks-blocks, len(spares))
			}
		})
	}
}
