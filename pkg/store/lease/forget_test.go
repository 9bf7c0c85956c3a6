package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// reset is a counters API reset of key as the admin server runs it: Forget,
// the backend's delete, Forget again.
func (r *rig) reset(key string) {
	r.t.Helper()
	r.s.Forget(key)
	if _, err := r.mem.Reset(context.Background(), []string{key}); err != nil {
		r.t.Fatal(err)
	}
	r.s.Forget(key)
}

// hasSpare reports whether a backend batch takes a block.
func hasSpare(reqs []store.Request) bool {
	for _, op := range reqs {
		if op.Mode == algorithms.Spare {
			return true
		}
	}
	return false
}

// A counters API reset deletes the key in the backend; Forget must drop
// the replica's block with it, or the block would admit hits that no
// counter holds any more (the window would then admit more than its
// limit). The unused hits lapse: their charge went with the key.
func TestForgetDropsTheBlock(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Minute)
	r.warm("k", lim, time.Millisecond)
	room := r.s.Room("k")
	if room == 0 {
		t.Fatal("no block after warming")
	}
	r.reset("k")
	if got := r.s.Room("k"); got != 0 {
		t.Fatalf("room after Forget = %d, want 0", got)
	}
	st := r.s.Stats()
	if st.Outstanding != 0 || st.Lapsed < room {
		t.Fatalf("stats after Forget = %+v, want nothing outstanding and the %d unused hits lapsed", st, room)
	}
	// The next hit goes to the backend, which counts it alone.
	if _, local := r.local(hit("k", lim, 1)); local {
		t.Fatal("a forgotten key was answered locally")
	}
	if got := r.count("k", lim); got != 1 {
		t.Fatalf("backend counts %d after the reset, want 1", got)
	}
	// Nothing is given back later either.
	r.clock.Advance(time.Hour)
	r.sweep()
	if got := r.s.Stats().Returned; got != 0 {
		t.Fatalf("returned %d hits of a forgotten block", got)
	}
}

// A lease that ended on the request path parks its unused hits for the
// next sweep to give back. After a reset they must not be: given back to
// the fresh counter, they would free hits it never counted.
func TestForgetDropsPendingReturns(t *testing.T) {
	r := newRig(t)
	lim := fixed(1000, time.Minute)
	r.warm("k", lim, time.Millisecond)
	// Idle: the next request ends the lease, and its rest waits.
	r.clock.Advance(30 * time.Second)
	r.take(hit("k", lim, 1))
	r.reset("k")
	// Hits after the reset, straight to the backend.
	if _, err := r.mem.Take(context.Background(), []store.Request{{Key: "k", Limit: lim, Hits: 10}}); err != nil {
		t.Fatal(err)
	}
	r.sweep()
	if got := r.count("k", lim); got != 10 {
		t.Fatalf("the backend counts %d after the reset and 10 hits, want 10: a block taken before the reset was given back to it", got)
	}
	if _, hits := r.rec.returned(); hits != 0 {
		t.Fatalf("%d hits of a lease ended before the reset were given back after it", hits)
	}
}

// A block in flight while the reset runs was charged to the counter the
// reset deleted: installed after it, it would admit hits the fresh counter
// never counted. It must be left unused, whether the request path
// (a top-up) or the sweeper (a refill ahead) took it.
func TestForgetDuringABlocksRoundTrip(t *testing.T) {
	for _, path := range []string{"top-up", "refill"} {
		t.Run(path, func(t *testing.T) {
			r := newRig(t)
			lim := fixed(1000, time.Minute)
			r.warm("k", lim, time.Millisecond)
			// Leave one hit, so that the next sweep refills ahead, and use
			// it for a top-up.
			if room := r.s.Room("k"); room > 1 {
				r.local(hit("k", lim, room-1))
			}
			inFlight := false
			r.rec.during = func(reqs []store.Request) {
				if hasSpare(reqs) && !inFlight {
					inFlight = true
					r.reset("k")
				}
			}
			if path == "top-up" {
				r.local(hit("k", lim, 1))
				r.take(hit("k", lim, 1))
			} else {
				r.sweep()
			}
			if !inFlight {
				t.Fatal("no block was taken: the test says nothing")
			}
			if room := r.s.Room("k"); room != 0 {
				t.Fatalf("a block taken before the reset was installed after it: room %d", room)
			}
			if st := r.s.Stats(); st.Outstanding != 0 {
				t.Fatalf("stats %+v: the block in flight is held", st)
			}
			// The backend counts only what came after the reset.
			if _, local := r.local(hit("k", lim, 1)); local {
				t.Fatal("answered locally after the reset")
			}
		})
	}
}
