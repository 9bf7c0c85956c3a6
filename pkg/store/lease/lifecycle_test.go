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
