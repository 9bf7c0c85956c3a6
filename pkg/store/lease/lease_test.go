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
		if got := lease.Leasable(tt.lim); got != tt.want {
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
