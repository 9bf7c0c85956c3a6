package lease_test

import (
	"context"
	"errors"
	"math/big"
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
	for _, lim := range leasing(algorithms.WindowLease, 1000, time.Minute) {
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

// The bucket slot of a block of b that a backend answered with ResetAfter
// RA, asked at tSend: slot k may be used up to tSend + RA - ceil((b-k)*P/R)
// - 1µs, computed here in big integers.
func slotDeadline(tSend time.Time, ra time.Duration, b, k uint64, lim algorithms.Limit) time.Time {
	x := new(big.Int).Mul(new(big.Int).SetUint64(b-k), big.NewInt(lim.Period.Microseconds()))
	r := new(big.Int).SetUint64(lim.Requests)
	x.Add(x, new(big.Int).Sub(r, big.NewInt(1)))
	x.Quo(x, r)
	return tSend.Add(ra).Add(-time.Duration(x.Int64())*time.Microsecond - time.Microsecond)
}

// A bucket lease's slots lapse by their deadlines, the earliest first, and
// are never given back: not on idle, ReturnAll or Close, and the backend's
// state does not move. Every algorithm the registry says leases bucket
// slots is run, and gcra with a burst below its rate too.
func TestBucketSlots(t *testing.T) {
	// T = 3s/7000: not a whole number of µs.
	limits := append(leasing(algorithms.BucketLease, 7000, 3*time.Second),
		algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 7000, Period: 3 * time.Second, Burst: 700})
	for _, lim := range limits {
		for _, how := range []string{"idle", "ReturnAll", "Close", "last slot"} {
			t.Run(lim.Algorithm.String()+"/"+how, func(t *testing.T) {
				r := newRig(t)
				r.limit = lim
				blk := takeBucketBlock(t, r)
				used := useSlots(t, r, blk)
				state := r.check("k", lim)
				endBucket(t, r, blk, how)
				if st := r.s.Stats(); st.Returned != 0 || st.Lapsed != blk.size-used || st.Outstanding != 0 {
					t.Fatalf("stats %+v, want %d lapsed, none returned", st, blk.size-used)
				}
				if calls, _ := r.rec.returned(); calls != 0 {
					t.Fatal("bucket slots given back")
				}
				if how == "last slot" {
					if _, ok := r.local(hit("k", lim, 1)); ok {
						t.Fatal("answered after the last slot's deadline")
					}
				}
				if how != "idle" && how != "last slot" {
					r.clock.Set(r.clock.Now()) // same instant: the state is comparable
					if got := r.check("k", lim); got != state {
						t.Fatalf("the backend's bucket moved: %+v, was %+v", got, state)
					}
				}
			})
		}
	}
}

// bucketBlock is a block of size slots, answered with ResetAfter ra to a
// request sent at tSend.
type bucketBlock struct {
	size  uint64
	ra    time.Duration
	tSend time.Time
}

// deadline is slot k's.
func (b bucketBlock) deadline(k uint64, lim algorithms.Limit) time.Time {
	return slotDeadline(b.tSend, b.ra, b.size, k, lim)
}

// takeBucketBlock sends hits every 100µs until a block of at least 10
// comes back.
func takeBucketBlock(t *testing.T, r *rig) bucketBlock {
	t.Helper()
	for range 200 {
		r.take(hit("k", r.limit, 1))
		if c := r.rec.last(); len(c.reqs) == 2 && c.res[1].Allowed && c.at.Equal(r.clock.Now()) && c.reqs[1].Hits >= 10 {
			r.clock.Advance(100 * time.Microsecond)
			return bucketBlock{size: c.reqs[1].Hits, ra: c.res[1].ResetAfter, tSend: c.at}
		}
		r.clock.Advance(100 * time.Microsecond)
	}
	t.Fatal("no block of 10")
	return bucketBlock{}
}

// useSlots uses slots 1, 2 and 5 at their deadlines, so that 0, 3 and 4
// lapse, then lets slot 6 pass for the sweeper to count; it returns the
// slots used.
func useSlots(t *testing.T, r *rig, blk bucketBlock) (used uint64) {
	t.Helper()
	lim, b := r.limit, blk.size
	localBefore := r.s.Stats().LocalHits
	for _, k := range []uint64{1, 2, 5} {
		at := blk.deadline(k, lim)
		r.clock.Set(at)
		if got := r.s.Room("k"); got != b-k {
			t.Fatalf("slot %d at its deadline: room %d, want %d", k, got, b-k)
		}
		r.clock.Set(at.Add(time.Microsecond))
		if got := r.s.Room("k"); got != b-k-1 {
			t.Fatalf("slot %d 1µs after its deadline: room %d, want %d", k, got, b-k-1)
		}
		r.clock.Set(at)
		if _, ok := r.local(hit("k", lim, 1)); !ok {
			t.Fatalf("slot %d not used at its deadline", k)
		}
		used++
	}
	if st := r.s.Stats(); st.Lapsed != 3 || st.Outstanding != b-6 || st.LocalHits != localBefore+used {
		t.Fatalf("stats %+v, want 3 lapsed and %d held", st, b-6)
	}
	// The sweeper counts slots past their deadlines as they pass.
	r.clock.Set(blk.deadline(6, lim).Add(time.Microsecond))
	r.sweep()
	if st := r.s.Stats(); st.Lapsed != 4 || st.Outstanding != b-7 {
		t.Fatalf("stats %+v after slot 6's deadline, want 4 lapsed and %d held", st, b-7)
	}
	return used
}

// endBucket ends the bucket lease how.
func endBucket(t *testing.T, r *rig, blk bucketBlock, how string) {
	t.Helper()
	switch how {
	case "idle":
		r.clock.Advance(lease.DefaultIdle)
		r.sweep()
	case "ReturnAll":
		if err := r.s.ReturnAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	case "Close":
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
	case "last slot":
		last := blk.deadline(blk.size-1, r.limit)
		r.clock.Set(last)
		if r.s.Room("k") != 1 {
			t.Fatalf("room %d at the last slot's deadline", r.s.Room("k"))
		}
		r.clock.Set(last.Add(time.Microsecond))
		if r.s.Room("k") != 0 {
			t.Fatal("room after the last slot's deadline")
		}
		r.sweep()
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
