package memstore_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// fill takes one hit on n keys of a 60 s fixed window, 64 keys a batch.
func fill(t testing.TB, s *memstore.Store, prefix string, n int) {
	t.Helper()
	batch := make([]store.Request, 0, 64)
	for i := range n {
		batch = append(batch, store.Request{Key: fmt.Sprint(prefix, i), Limit: window(1000, time.Minute), Hits: 1})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.Take(t.Context(), batch); err != nil {
				t.Fatalf("Take: %v", err)
			}
			batch = batch[:0]
		}
	}
}

// TestBackgroundSweep runs in a synctest bubble: the sweeper's ticker runs
// on the bubble's clock, and synctest.Wait returns only once the sweeper is
// idle, so "the sweeper kept everything" is checked after its passes, not
// before it got to run.
func TestBackgroundSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := storetest.NewClock(storetest.Epoch())
		s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(time.Millisecond, time.Millisecond))
		defer s.Close()

		const n = 5000
		fill(t, s, "k", n)
		if got := s.Len(); got != n {
			t.Fatalf("Len = %d, want %d", got, n)
		}
		// Before the boundary the sweeper must keep everything: 20 passes.
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		if got := s.Len(); got != n {
			t.Fatalf("Len before expiry = %d, want %d", got, n)
		}
		clock.Set(storetest.Epoch().Add(time.Minute))
		// A key read after its expiry is fresh even before the sweeper reaches it.
		res := mustTake(t, s, store.Request{Key: "k0", Limit: window(1000, time.Minute), Hits: 0})
		if res[0].Remaining != 1000 {
			t.Errorf("expired key reads remaining %d, want 1000", res[0].Remaining)
		}
		testkit.WaitFor(t, 10*time.Second, "the sweeper to drop every expired key", func() bool { return s.Len() == 0 })
		if s.Expired() != n || s.Evictions() != 0 {
			t.Errorf("Expired %d, Evictions %d; want %d and 0", s.Expired(), s.Evictions(), n)
		}
	})
}

func TestCloseStopsSweeper(t *testing.T) {
	// Sweepers are told apart by goroutine ID, not counted among all
	// goroutines: other tests' goroutines, sweepers included, may exit
	// meanwhile and hide a missing one.
	before := sweepers()
	stores := make([]*memstore.Store, 20)
	for i := range stores {
		stores[i] = memstore.New(memstore.WithSweep(time.Millisecond, time.Millisecond))
	}
	var started []string
	for id := range sweepers() {
		if !before[id] {
			started = append(started, id)
		}
	}
	if len(started) != len(stores) {
		t.Fatalf("%d sweepers started, want %d: one per store", len(started), len(stores))
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for its sweeper to finish; polling only covers the
	// instant between that and the goroutine's exit. A leak stays.
	testkit.WaitFor(t, 2*time.Second, "every sweeper to stop", func() bool {
		now := sweepers()
		return !slices.ContainsFunc(started, func(id string) bool { return now[id] })
	})
}

// sweepers is the set of IDs of the goroutines memstore.New started (its
// sweepers only), found by the "created by" line of their stacks: a
// goroutine not yet running shows a compiler wrapper, not sweepLoop.
func sweepers() map[string]bool {
	buf := make([]byte, 1<<20)
	for len(buf) == runtime.Stack(buf, true) {
		buf = make([]byte, 2*len(buf))
	}
	ids := map[string]bool{}
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "\ncreated by github.com/ratelimitd/ratelimitd/pkg/store/memstore.New ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
			ids[id] = true
		}
	}
	return ids
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestIdleMemoryIsReturned: once every key has expired and been swept, the
// shards are rebuilt so the heap falls back near where it started.
func TestIdleMemoryIsReturned(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer s.Close()

	n := 200_000
	if raceEnabled {
		n = 50_000
	}
	base := heapInUse()
	fill(t, s, "key-", n)
	full := heapInUse()
	clock.Set(storetest.Epoch().Add(time.Minute))
	s.Sweep()
	idle := heapInUse()
	t.Logf("heap in use: %d MiB empty, %d MiB with %d keys, %d MiB after expiry", base>>20, full>>20, n, idle>>20)
	if s.Len() != 0 {
		t.Fatalf("Len after Sweep = %d", s.Len())
	}
	grown := full - base
	if idle > base+grown/4 {
		t.Errorf("heap after expiry %d B, want under %d B (empty %d + a quarter of the %d B the keys took)", idle, base+grown/4, base, grown)
	}
}

// TestRequestsLeaveExpiryToTheSweeper: requests right after every counter
// expired at one boundary pay for their own keys only. The first call after
// a boundary used to drop every expired state (72 ms for 178k counters);
// with the sweeper off, the expired states must still be there after the
// calls, whatever the machine's speed.
func TestRequestsLeaveExpiryToTheSweeper(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer s.Close()
	const n, calls = 10_000, 100
	fill(t, s, "c", n)
	clock.Set(storetest.Epoch().Add(time.Minute))
	for i := range calls {
		res := mustTake(t, s, store.Request{Key: fmt.Sprint("c", i*97), Limit: window(1000, time.Minute), Hits: 1})
		if res[0].Remaining != 999 {
			t.Fatalf("expired counter c%d after the boundary: remaining %d, want 999 (fresh)", i*97, res[0].Remaining)
		}
	}
	if s.Len() != n || s.Expired() != 0 {
		t.Fatalf("after %d calls past the boundary: Len %d, Expired %d; want %d and 0 (expiry left to the sweeper)", calls, s.Len(), s.Expired(), n)
	}
	s.Sweep()
	if s.Len() != calls || s.Expired() != n-calls {
		t.Errorf("after the sweep: Len %d, Expired %d; want %d (the counters just written) and %d", s.Len(), s.Expired(), calls, n-calls)
	}
}
