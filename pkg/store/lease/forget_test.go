package lease_test

import (
	"context"
	"testing"
	"time"
)

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
	// The reset: the backend forgets the key, the replica its block.
	if _, err := r.mem.Reset(context.Background(), []string{"k"}); err != nil {
		t.Fatal(err)
	}
	r.s.Forget("k")
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
