package lease_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

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
	limits := append(leasing(bucketLease, 7000, 3*time.Second),
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
