package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

func TestLeasable(t *testing.T) {
	tests := []struct {
		name string
		lim  algorithms.Limit
		want bool
	}{
		{"fixed_window", fixed(10, time.Second), true},
		{"sliding_window", sliding(10, time.Second), true},
		{"gcra", algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 10, Period: time.Second, Burst: 5}, true},
		{"leaky_bucket", algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second}, true},
		{"token_bucket", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}, true},
		{"token_bucket refill_interval", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, RefillInterval: 100 * time.Millisecond}, false},
		{"token_bucket max_debt", algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, MaxDebt: 3}, false},
		{"sliding_log", algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 10, Period: time.Second}, false},
		{"zero limit", fixed(0, time.Second), false},
		{"invalid", fixed(10, 0), false},
		{"unset", algorithms.Limit{Requests: 10, Period: time.Second}, false},
	}
	for _, tt := range tests {
		if got := tt.lim.Leasable(); got != tt.want {
			t.Errorf("%s: Leasable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A batch without any Lease op reaches the backend as it came: the same
// slice, through Take, with nothing tracked.
func TestPassThrough(t *testing.T) {
	r := newRig(t)
	lim := fixed(100, time.Minute)
	for range 50 {
		reqs := []store.Request{{Key: "a", Limit: lim, Hits: 1}, {Key: "b", Limit: lim, Hits: 1}}
		r.take(reqs...)
		c := r.rec.last()
		if c.charged || len(c.reqs) != 2 {
			t.Fatalf("backend got %+v (charged %v), want the batch through Take", c.reqs, c.charged)
		}
		r.clock.Advance(time.Millisecond)
	}
	if r.rec.takes != 50 || r.s.Stats() != (lease.Stats{}) {
		t.Fatalf("%d backend takes, stats %+v", r.rec.takes, r.s.Stats())
	}
	// The same slice, not a copy.
	reqs := []store.Request{{Key: "a", Limit: lim, Hits: 1}}
	if _, err := r.s.Take(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	if got := r.rec.last().reqs; &got[0] != &reqs[0] {
		t.Fatal("the batch was copied")
	}
}

// Blocks are taken only for hot leasable keys, sized min(ceil(rate*target),
// max block, floor(fraction*left)); near the limit every decision goes to
// the backend.
func TestBlockSizing(t *testing.T) {
	for _, tt := range blockSizingCases {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.opts...)
			for range tt.n {
				r.take(hit("k", tt.lim, 1))
				r.clock.Advance(tt.gap)
			}
			ops, _ := r.rec.spares()
			if tt.wantMax == 0 {
				if len(ops) > 0 || r.s.Stats().Blocks > 0 {
					t.Fatalf("blocks taken: %+v", ops)
				}
				return
			}
			if len(ops) == 0 {
				t.Fatal("no block")
			}
			last := ops[len(ops)-1].Hits
			if last < tt.wantMin || last > tt.wantMax {
				t.Fatalf("last block %d, want %d..%d", last, tt.wantMin, tt.wantMax)
			}
			for _, op := range ops {
				if op.Hits > tt.wantMax || op.Hits < 2 {
					t.Fatalf("block of %d, want 2..%d", op.Hits, tt.wantMax)
				}
			}
			t.Logf("%d blocks, last %d", len(ops), last)
		})
	}
}

// blockSizingCases are TestBlockSizing's.
var blockSizingCases = []struct {
	name    string
	lim     algorithms.Limit
	opts    []lease.Option
	gap     time.Duration // between single hits
	n       int           // hits sent
	wantMin uint64        // the last block's size range (0, 0: no block)
	wantMax uint64
}{
	{name: "a key first seen has no rate", lim: fixed(1e6, time.Hour), gap: time.Millisecond, n: 1},
	{name: "a cold key never leases", lim: fixed(1e6, time.Hour), gap: max(2*lease.DefaultTarget, lease.DefaultIdle) + time.Second, n: 30},
	{name: "a cold key back within LEASE_IDLE leases 2", lim: fixed(1e6, time.Hour), gap: 2 * lease.DefaultTarget,
		n: 30, wantMin: 2, wantMax: 2},
	{name: "a cold sliding_window key back within LEASE_IDLE leases 2", lim: sliding(1e6, time.Hour), gap: 2 * lease.DefaultTarget,
		n: 30, wantMin: 2, wantMax: 2},
	{name: "not when LEASE_IDLE is off", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithIdle(0)},
		gap: 2 * lease.DefaultTarget, n: 30},
	{name: "not past LEASE_IDLE", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithIdle(10 * time.Second)},
		gap: 11 * time.Second, n: 30},
	{name: "not a cold bucket", lim: algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 1e6, Period: time.Hour},
		gap: 2 * lease.DefaultTarget, n: 30},
	{name: "not a cold key near its limit", lim: fixed(15, time.Hour), gap: 2 * lease.DefaultTarget, n: 30},
	{name: "rate*target", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithTarget(time.Second)},
		gap: 10 * time.Millisecond, n: 400, wantMin: 99, wantMax: 101},
	{name: "rate*target, the default target", lim: fixed(1e6, time.Hour), gap: 10 * time.Millisecond,
		n: int(3 * lease.DefaultTarget / (10 * time.Millisecond)), wantMin: uint64(lease.DefaultTarget/(10*time.Millisecond)) - 1,
		wantMax: uint64(lease.DefaultTarget/(10*time.Millisecond)) + 1},
	{name: "rate*target, shorter target", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithTarget(200 * time.Millisecond)},
		gap: 10 * time.Millisecond, n: 400, wantMin: 19, wantMax: 21},
	{name: "max block", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithMaxBlock(40)},
		gap: 10 * time.Millisecond, n: 400, wantMin: 40, wantMax: 40},
	{name: "max block below 2 leases nothing", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithMaxBlock(1)},
		gap: 10 * time.Millisecond, n: 400},
	{name: "fraction 0 leases nothing", lim: fixed(1e6, time.Hour), opts: []lease.Option{lease.WithFraction(0)},
		gap: 10 * time.Millisecond, n: 400},
	{name: "sliding_log does not lease", lim: algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 1e4, Period: time.Hour},
		gap: 10 * time.Millisecond, n: 400},
	{name: "stepped token bucket does not lease",
		lim: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1e6, Period: time.Hour, RefillInterval: time.Minute},
		gap: 10 * time.Millisecond, n: 400},
}

// A block is at most the fraction of what the counter has left after the
// request's hits, so it shrinks towards the limit, and below 2 every
// decision goes to the backend: the last hits are decided one by one.
func TestBlocksShrinkNearTheLimit(t *testing.T) {
	for _, lim := range []algorithms.Limit{fixed(300, time.Hour), sliding(300, time.Hour),
		{Algorithm: algorithms.GCRA, Requests: 300, Period: time.Hour}} {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			r := newRig(t, lease.WithFraction(0.1))
			var admitted uint64
			for range 400 {
				left := r.check("k", lim).Remaining
				held := r.s.Stats().Outstanding
				before := r.rec.calls()
				res := r.take(hit("k", lim, 1))
				reached := r.rec.calls() > before
				if res[0].Allowed {
					admitted++
				}
				if left < 20 && held == 0 && !reached {
					t.Fatalf("answered locally with %d left and no lease", left)
				}
				if reached {
					if c := r.rec.last(); len(c.reqs) == 2 {
						if b := c.reqs[1].Hits; float64(b) > 0.1*float64(left-1) {
							t.Fatalf("block of %d with %d left before the request's hit", b, left)
						}
					}
				}
				r.clock.Advance(10 * time.Millisecond)
			}
			// A single replica uses every block it takes: exact.
			if admitted != lim.Requests || r.s.Stats().Outstanding != 0 {
				t.Fatalf("admitted %d of %d, stats %+v", admitted, lim.Requests, r.s.Stats())
			}
		})
	}
}

// answered locally: all or nothing over several keys; a batch with one op
// lacking room goes to the backend whole, topping that key's lease up;
// checks, usage and non-enforce ops pass through untouched.
func TestLocalAnswers(t *testing.T) {
	for _, tt := range localAnswerCases {
		t.Run(tt.name, func(t *testing.T) {
			r := leaseAB(t)
			r.clock.Advance(time.Millisecond)
			before := r.s.Stats()
			countA, countB := r.count("a", localLim), r.count("b", localOther)
			res, local := r.local(tt.reqs...)
			after := r.s.Stats()
			if local != tt.wantLocal {
				t.Fatalf("local %v, want %v", local, tt.wantLocal)
			}
			if !local {
				checkBackendBatch(t, r, before, tt.wantBackend)
				return
			}
			// Charged before: the backend's counters do not move.
			if r.count("a", localLim) != countA || r.count("b", localOther) != countB {
				t.Fatal("a local answer reached the backend's counters")
			}
			var hits uint64
			for _, op := range tt.reqs {
				hits += op.Hits
			}
			if after.LocalHits-before.LocalHits != hits || before.Outstanding-after.Outstanding != hits {
				t.Fatalf("stats %+v then %+v for %d hits", before, after, hits)
			}
			for i, x := range res {
				if !x.Allowed || x.FromCache || x.RetryAfter != 0 || x.ResetAfter <= 0 || x.ResetAfter > time.Minute ||
					x.Remaining > tt.reqs[i].Limit.Requests {
					t.Fatalf("result %d: %+v", i, x)
				}
			}
		})
	}
}

// The limits of TestLocalAnswers' keys a and b.
var localLim, localOther = fixed(1000, time.Minute), fixed(500, time.Minute)

// localAnswerCases are TestLocalAnswers'.
var localAnswerCases = []struct {
	name      string
	reqs      []store.Request
	wantLocal bool
	// wantBackend is the batch the backend gets (nil: reqs unchanged),
	// Spare ops included.
	wantBackend []store.Request
}{{
	name:      "every key has room",
	reqs:      []store.Request{hit("a", localLim, 1), hit("b", localOther, 1)},
	wantLocal: true,
}, {
	name:      "a key named twice within its room",
	reqs:      []store.Request{hit("a", localLim, 1), hit("b", localOther, 1), hit("a", localLim, 1)},
	wantLocal: true,
}, {
	name:        "a key named twice beyond its room",
	reqs:        []store.Request{hit("a", localLim, 2), hit("b", localOther, 1), hit("a", localLim, 1)},
	wantBackend: []store.Request{hit("a", localLim, 2), hit("b", localOther, 1), hit("a", localLim, 1), spare("a", localLim, 0)},
}, {
	name:        "one key without a lease",
	reqs:        []store.Request{hit("a", localLim, 1), hit("c", localLim, 1)},
	wantBackend: []store.Request{hit("a", localLim, 1), hit("c", localLim, 1)},
}, {
	name:        "one op lacking room tops its key up",
	reqs:        []store.Request{hit("a", localLim, 1), hit("b", localOther, 3)},
	wantBackend: []store.Request{hit("a", localLim, 1), hit("b", localOther, 3), spare("b", localOther, 0)},
}, {
	name:        "a check passes through",
	reqs:        []store.Request{hit("a", localLim, 0)},
	wantBackend: []store.Request{hit("a", localLim, 0)},
}, {
	name:        "usage passes through, no top-up on its key",
	reqs:        []store.Request{{Key: "a", Limit: localLim, Hits: 5, Usage: true, Lease: true}, hit("a", localLim, 3)},
	wantBackend: []store.Request{{Key: "a", Limit: localLim, Hits: 5, Usage: true, Lease: true}, hit("a", localLim, 3)},
}, {
	name:        "shadow passes through",
	reqs:        []store.Request{{Key: "a", Limit: localLim, Hits: 1, Mode: algorithms.Shadow, Lease: true}},
	wantBackend: []store.Request{{Key: "a", Limit: localLim, Hits: 1, Mode: algorithms.Shadow, Lease: true}},
}, {
	name:        "an op without Lease",
	reqs:        []store.Request{hit("a", localLim, 1), {Key: "b", Limit: localOther, Hits: 1}},
	wantBackend: []store.Request{hit("a", localLim, 1), {Key: "b", Limit: localOther, Hits: 1}},
}, {
	name:        "a rule changed by reload",
	reqs:        []store.Request{hit("a", fixed(999, time.Minute), 1)},
	wantBackend: []store.Request{hit("a", fixed(999, time.Minute), 1)},
}}

// leaseAB leases a and b with room for 2 hits each.
func leaseAB(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	for key, l := range map[string]algorithms.Limit{"a": localLim, "b": localOther} {
		for range 20 {
			r.take(hit(key, l, 1))
			r.clock.Advance(time.Millisecond)
		}
		room := r.s.Room(key)
		if room < 2 {
			t.Fatalf("%s: room %d", key, room)
		}
		if _, ok := r.local(hit(key, l, room-2)); room > 2 && !ok {
			t.Fatalf("%s: %d hits of room %d not local", key, room-2, room)
		}
	}
	return r
}

// checkBackendBatch: a batch that went to the backend used no lease and
// reached it as want (a Spare op of any size of at least 2).
func checkBackendBatch(t *testing.T, r *rig, before lease.Stats, want []store.Request) {
	t.Helper()
	if r.s.Stats().LocalHits != before.LocalHits {
		t.Fatal("a batch that went to the backend used a lease")
	}
	got := r.rec.last().reqs
	if len(got) != len(want) {
		t.Fatalf("backend got %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if w.Mode == algorithms.Spare && g.Mode == algorithms.Spare && g.Key == w.Key && g.Limit == w.Limit && g.Hits >= 2 {
			continue // its size is TestBlockSizing's business
		}
		if g != w {
			t.Fatalf("backend op %d: %+v, want %+v", i, g, w)
		}
	}
}

// spare is the top-up the backend should see (hits 0: any size).
func spare(key string, lim algorithms.Limit, hits uint64) store.Request {
	return store.Request{Key: key, Limit: lim, Hits: hits, Mode: algorithms.Spare}
}

// A local answer reports what this replica could still admit: the
// backend's latest Remaining plus the lease's room, and the window's end.
func TestLocalDecision(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Minute)
	r.clock.Advance(20 * time.Second)
	for range 30 {
		r.take(hit("k", lim, 1))
		r.clock.Advance(time.Millisecond)
	}
	ops, ds := r.rec.spares()
	if len(ops) == 0 {
		t.Fatal("no block")
	}
	res, local := r.local(hit("k", lim, 1))
	if !local {
		t.Fatal("not answered locally")
	}
	stats := r.s.Stats()
	want := algorithms.Decision{Allowed: true, Remaining: ds[len(ds)-1].Remaining + stats.Outstanding,
		ResetAfter: time.Minute - 20*time.Second - 30*time.Millisecond}
	if res[0].Decision != want {
		t.Fatalf("local decision %+v, want %+v", res[0].Decision, want)
	}
	if want.Remaining != lim.Requests-31 {
		t.Fatalf("remaining %d after 31 hits of %d", want.Remaining, lim.Requests)
	}
}

// The keys tracked are bounded; a dropped key's window lease gives its
// hits back like any other ending one.
func TestMaxKeys(t *testing.T) {
	r := newRig(t, lease.WithMaxKeys(64)) // one key per shard
	lim := fixed(1000, time.Minute)
	var admitted uint64
	for range 30 {
		r.take(hit("a", lim, 1))
		admitted++
		r.clock.Advance(time.Millisecond)
	}
	if r.s.Room("a") == 0 {
		t.Fatal("no lease")
	}
	for i := 0; r.s.Room("a") > 0; i++ {
		if i == 10000 {
			t.Fatal("a never dropped")
		}
		r.take(hit(fmt.Sprint("other", i), lim, 1))
	}
	if n := r.s.Tracked(); n > 64 {
		t.Fatalf("%d keys tracked", n)
	}
	r.sweep()
	if st := r.s.Stats(); st.Returned == 0 || st.Outstanding != 0 || r.count("a", lim) != admitted {
		t.Fatalf("stats %+v, backend counts %d of a for %d admitted", st, r.count("a", lim), admitted)
	}
}
