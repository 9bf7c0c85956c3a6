package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// windowEnd is one way a window lease ends: end ends it, returning
// whether the hits should be back (false: lapsed with the window).
type windowEnd struct {
	name string
	opts []lease.Option
	end  func(t *testing.T, r *rig, admit func(n int)) bool
}

var windowEnds = []windowEnd{{
	name: "idle, swept",
	// LEASE_MAX_AGE would trim the quiet lease first.
	opts: []lease.Option{lease.WithMaxAge(time.Hour)},
	end: func(t *testing.T, r *rig, _ func(int)) bool {
		r.clock.Advance(lease.DefaultIdle - time.Microsecond)
		r.sweep()
		if r.s.Stats().Returned != 0 {
			t.Fatal("returned before idle")
		}
		r.clock.Advance(time.Microsecond)
		r.sweep()
		return true
	},
}, {
	name: "idle, seen on the request path",
	end: func(t *testing.T, r *rig, admit func(int)) bool {
		r.clock.Advance(lease.DefaultIdle)
		calls := r.rec.calls()
		admit(1)
		if r.rec.calls() == calls {
			t.Fatal("an idle lease answered")
		}
		r.sweep()
		return true
	},
}, {
	name: "max age",
	opts: []lease.Option{lease.WithMaxAge(3 * time.Second), lease.WithIdle(0)},
	end: func(t *testing.T, r *rig, admit func(int)) bool {
		// Keep using it, slowly, past its age; a new lease follows.
		for range 40 {
			r.clock.Advance(100 * time.Millisecond)
			admit(1)
		}
		r.sweep()
		if r.s.Stats().Returned == 0 {
			t.Fatal("nothing returned at max age")
		}
		return true
	},
}, {
	name: "ReturnAll",
	end: func(t *testing.T, r *rig, _ func(int)) bool {
		if err := r.s.ReturnAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		return true
	},
}, {
	name: "SetRules with new rules",
	end: func(t *testing.T, r *rig, _ func(int)) bool {
		for _, rules := range []string{"v1", "v2"} {
			if err := r.s.SetRules(context.Background(), rules); err != nil {
				t.Fatal(err)
			}
		}
		return true
	},
}, {
	name: "Close",
	end: func(t *testing.T, r *rig, _ func(int)) bool {
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		return true
	},
}, {
	name: "window end",
	opts: []lease.Option{lease.WithIdle(0), lease.WithMaxAge(0)},
	end: func(t *testing.T, r *rig, _ func(int)) bool {
		now := r.clock.Now()
		windowEnd := now.Truncate(time.Minute).Add(time.Minute)
		r.clock.Set(windowEnd.Add(-time.Microsecond))
		if _, ok := r.local(hit("k", r.lim(), 1)); !ok {
			t.Fatal("no local answer 1µs before the window's end")
		}
		r.clock.Set(windowEnd)
		calls := r.rec.calls()
		if res, ok := r.local(hit("k", r.lim(), 1)); ok || !res[0].Allowed {
			t.Fatalf("at the window's end: local %v, %+v", ok, res[0])
		}
		if r.rec.calls() != calls+1 {
			t.Fatal("not one backend call")
		}
		return false
	},
}}

// A window lease gives its unused hits back exactly when it ends on idle,
// max age, ReturnAll, a rule change or Close, in one Return; at its
// window's end it is dropped (nothing to give back) and never answers
// again. With one replica in one window the backend then counts exactly
// the hits admitted, plus what a live lease still holds. Every algorithm
// the registry says leases windows is run.
func TestWindowLeaseEnds(t *testing.T) {
	for _, lim := range leasing(windowLease, 1000, time.Minute) {
		for _, e := range windowEnds {
			t.Run(lim.Algorithm.String()+"/"+e.name, func(t *testing.T) {
				r := newRig(t, e.opts...)
				r.limit = lim
				r.clock.Advance(10 * time.Second)
				var admitted uint64
				admit := func(n int) {
					for range n {
						if !r.take(hit("k", lim, 1))[0].Allowed {
							t.Fatal("denied")
						}
						admitted++
					}
				}
				for range 150 {
					r.clock.Advance(10 * time.Millisecond)
					admit(1)
				}
				held := r.s.Stats().Outstanding
				if held == 0 || r.count("k", lim) != admitted+held {
					t.Fatalf("backend counts %d for %d admitted and %d held", r.count("k", lim), admitted, held)
				}
				before := r.s.Stats()
				start := r.clock.Now().Truncate(time.Minute)
				if e.end(t, r, admit) {
					checkReturned(t, r, before, admitted)
				} else {
					checkWindowEnded(t, r, before, held, start)
				}
			})
		}
	}
}

// checkReturned: the lease's unused hits came back in at most two
// Returns, and the backend counts the hits admitted and those still held.
func checkReturned(t *testing.T, r *rig, before lease.Stats, admitted uint64) {
	t.Helper()
	after := r.s.Stats()
	if after.Returned == 0 || after.Lapsed != before.Lapsed {
		t.Fatalf("stats %+v then %+v", before, after)
	}
	calls, hits := r.rec.returned()
	if hits != after.Returned || calls > 2 {
		t.Fatalf("%d returns of %d hits, stats %+v", calls, hits, after)
	}
	if got, want := r.count("k", r.limit), admitted+after.Outstanding; got != want {
		t.Fatalf("backend counts %d, want %d admitted + %d held", got, admitted, after.Outstanding)
	}
}

// checkWindowEnded: the lease went with its window, nothing given back
// (the request at the end may have taken a new block).
func checkWindowEnded(t *testing.T, r *rig, before lease.Stats, held uint64, start time.Time) {
	t.Helper()
	after := r.s.Stats()
	if after.Returned != 0 || after.Lapsed-before.Lapsed != held-1 {
		t.Fatalf("stats %+v then %+v (held %d)", before, after, held)
	}
	if calls, _ := r.rec.returned(); calls != 0 {
		t.Fatal("a Return for an ended window")
	}
	if !r.clock.Now().Truncate(time.Minute).After(start) {
		t.Fatal("still in the window")
	}
}

// The sweeper goroutine gives an idle lease's hits back on its own, and
// Close stops it (synctest fails a test that leaves goroutines running).
func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		s := lease.New(shared{mem}) // real (bubble) clock, default sweeper
		lim := fixed(1000, time.Hour)
		var admitted uint64
		for range 50 {
			if res, err := s.Take(context.Background(), []store.Request{hit("k", lim, 1)}); err != nil || !res[0].Allowed {
				t.Fatal(res, err)
			}
			admitted++
			time.Sleep(time.Millisecond)
		}
		if s.Stats().Outstanding == 0 {
			t.Fatal("no lease")
		}
		time.Sleep(lease.DefaultIdle + 2*lease.DefaultSweepInterval)
		synctest.Wait()
		if st := s.Stats(); st.Outstanding != 0 || st.Returned == 0 {
			t.Fatalf("after idle: %+v", st)
		}
		res, err := mem.Take(context.Background(), []store.Request{{Key: "k", Limit: lim}})
		if err != nil || lim.Requests-res[0].Remaining != admitted {
			t.Fatalf("backend %+v %v, %d admitted", res, err, admitted)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mem.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A backend failure: a failed top-up surfaces its error and leaves no block
// in flight (the next request tops up again); a failed Return leaves the
// hits charged, counted as lapsed, never used again.
func TestBackendFailures(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Minute)
	for range 3 {
		r.take(hit("k", lim, 1))
		r.clock.Advance(time.Millisecond)
	}
	// Use the lease up, so the next request tops up.
	if room := r.s.Room("k"); room > 0 {
		if _, ok := r.local(hit("k", lim, room)); !ok {
			t.Fatal("not local")
		}
	}
	r.rec.fail.Store(true)
	if _, err := r.s.Take(context.Background(), []store.Request{hit("k", lim, 1)}); !errors.Is(err, errBackend) {
		t.Fatalf("Take: %v", err)
	}
	r.rec.fail.Store(false)
	r.take(hit("k", lim, 1))
	if c := r.rec.last(); len(c.reqs) != 2 || c.reqs[1].Mode != algorithms.Spare {
		t.Fatalf("no top-up after a failed one: %+v", c.reqs)
	}
	held := r.s.Stats().Outstanding
	count := r.count("k", lim)
	r.rec.fail.Store(true)
	if err := r.s.ReturnAll(context.Background()); !errors.Is(err, errBackend) {
		t.Fatalf("ReturnAll: %v", err)
	}
	r.rec.fail.Store(false)
	if st := r.s.Stats(); held == 0 || st.Lapsed != held || st.Returned != 0 || st.ReturnErrors != 1 || st.Outstanding != 0 {
		t.Fatalf("stats %+v, %d held", st, held)
	}
	if r.count("k", lim) != count || r.s.Room("k") != 0 {
		t.Fatal("a failed return freed hits")
	}
}
