package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func window(n uint64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: period}
}

func mustTake(t *testing.T, s *memstore.Store, reqs ...store.Request) []store.Result {
	t.Helper()
	res, err := s.Take(t.Context(), reqs)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return res
}

func TestExpiredStatesAreDropped(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer s.Close()

	// Windows of 10 s and 60 s: states expire at the end of their window.
	mustTake(t, s, store.Request{Key: "short", Limit: window(5, 10*time.Second), Hits: 1})
	mustTake(t, s, store.Request{Key: "long", Limit: window(5, time.Minute), Hits: 1})
	mustTake(t, s, store.Request{Key: "checked", Limit: window(5, time.Minute), Hits: 0})

	steps := []struct {
		at   time.Duration
		want int
	}{
		{at: 0, want: 2}, // a check writes nothing
		{at: 10*time.Second - time.Microsecond, want: 2},
		{at: 10 * time.Second, want: 1},
		{at: time.Minute, want: 0},
	}
	for _, st := range steps {
		clock.Set(storetest.Epoch().Add(st.at))
		// Expired states go in the sweep, off the request path.
		s.Sweep()
		if got := s.Len(); got != st.want {
			t.Errorf("at %s: Len() = %d, want %d", st.at, got, st.want)
		}
	}
	if s.Evictions() != 0 {
		t.Errorf("Evictions() = %d without a key bound", s.Evictions())
	}
}

func TestMaxKeys(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithMaxKeys(3))
	defer s.Close()

	// Keys k0..k2 expire at 10 s, 20 s, 30 s.
	for i := range 3 {
		mustTake(t, s, store.Request{Key: fmt.Sprint("k", i), Limit: window(1, time.Duration(i+1)*10*time.Second), Hits: 1})
	}
	check := func(key string, period time.Duration) store.Result {
		return mustTake(t, s, store.Request{Key: key, Limit: window(1, period), Hits: 0})[0]
	}

	// Full, nothing expired: k0 (closest to expiry) goes and starts fresh.
	mustTake(t, s, store.Request{Key: "new", Limit: window(1, time.Minute), Hits: 1})
	if s.Len() != 3 || s.Evictions() != 1 {
		t.Fatalf("after a 4th key: Len %d, Evictions %d; want 3 and 1", s.Len(), s.Evictions())
	}
	if r := check("k0", 10*time.Second); r.Remaining != 1 {
		t.Errorf("evicted k0 should read fresh, got remaining %d", r.Remaining)
	}
	if r := check("k1", 20*time.Second); r.Remaining != 0 {
		t.Errorf("k1 should have survived eviction, got remaining %d", r.Remaining)
	}

	// At 20 s k1 has expired: it makes room without counting an eviction.
	clock.Set(storetest.Epoch().Add(20 * time.Second))
	mustTake(t, s, store.Request{Key: "newer", Limit: window(1, time.Minute), Hits: 1})
	if s.Len() != 3 || s.Evictions() != 1 {
		t.Errorf("after expiry made room: Len %d, Evictions %d; want 3 and 1", s.Len(), s.Evictions())
	}
}

func TestClose(t *testing.T) {
	s := memstore.New()
	mustTake(t, s, store.Request{Key: "k", Limit: window(5, time.Second), Hits: 1})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.Take(context.Background(), []store.Request{{Key: "k", Limit: window(5, time.Second), Hits: 1}})
	if !errors.Is(err, memstore.ErrClosed) {
		t.Fatalf("Take after Close: %v, want ErrClosed", err)
	}
}
