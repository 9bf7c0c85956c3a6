package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// roundTrips records what WithRoundTripObserver reports.
type roundTrips struct {
	mu     sync.Mutex
	took   []time.Duration
	failed []bool
}

func (r *roundTrips) observe(took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.took = append(r.took, took)
	r.failed = append(r.failed, err != nil)
}

// TestRoundTripObserver: one observation per script call, however many
// keys it carries, with the error when Redis is gone.
func TestRoundTripObserver(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch())
	var rt roundTrips
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now),
		redisstore.WithTimeout(time.Second), redisstore.WithRoundTripObserver(rt.observe))

	mustTake(t, s, batch(5, window(5), 1))
	mustTake(t, s, batch(1, window(5), 1))
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Take(ctx, batch(2, window(5), 1)); err == nil {
		t.Fatal("Take with Redis stopped succeeded")
	}

	rt.mu.Lock()
	defer rt.mu.Unlock()
	want := []bool{false, false, true}
	if len(rt.failed) != len(want) {
		t.Fatalf("%d observations for 3 Takes, want 3: %v", len(rt.failed), rt.failed)
	}
	for i := range want {
		if rt.failed[i] != want[i] {
			t.Errorf("observation %d: failed = %v, want %v", i, rt.failed[i], want[i])
		}
		if rt.took[i] <= 0 || rt.took[i] > 2*time.Second {
			t.Errorf("observation %d: took %s, want a positive round trip under the timeout", i, rt.took[i])
		}
	}
}
