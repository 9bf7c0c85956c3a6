package memstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// TestSweeperFreesMemoryOnceIdle: after the counters of one boundary expire,
// the background sweeper hands their memory back to the OS, but only once
// no request has come for a whole pass: freeing forces a collection no
// request should wait behind. In a synctest bubble, so that requests land
// between the sweeper's passes (every 1 ms, requests at x.5 ms) and "idle"
// is a number of passes, not a guess at the scheduler.
func TestSweeperFreesMemoryOnceIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var frees atomic.Int32
		countFrees := func(s *Store) { s.freeHook = func() { frees.Add(1); freeOSMemory() } }
		clock := fakeclock.New(time.Unix(1_800_000_000, 0).Truncate(time.Minute))
		s := New(WithClock(clock.Now), WithSweep(time.Millisecond, time.Millisecond), countFrees)
		defer s.Close()

		lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Minute}
		take := func(key string) {
			t.Helper()
			if _, err := s.Take(t.Context(), []store.Request{{Key: key, Limit: lim, Hits: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		n := 2 * freeAfter // enough released map slots to be worth freeing
		for i := range n {
			take(fmt.Sprint("c", i))
		}
		full := heapInUseNow()
		clock.Advance(time.Minute)

		time.Sleep(time.Millisecond / 2)
		for range 20 {
			take("busy")
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if s.Len() != 1 {
			t.Fatalf("Len %d after 20 sweeper passes past the boundary, want 1 (the key just taken)", s.Len())
		}
		if f := frees.Load(); f != 0 {
			t.Fatalf("memory freed %d times with a request between every two passes, want 0", f)
		}

		time.Sleep(5 * time.Millisecond) // idle: no requests for five passes
		synctest.Wait()
		if f := frees.Load(); f != 1 {
			t.Fatalf("memory freed %d times once idle, want 1", f)
		}
		if idle := heapInUseNow(); idle > full/2 {
			t.Errorf("heap in use %d B once idle, %d B with %d counters: want under half", idle, full, n)
		}
	})
}

// heapInUseNow reads the heap without collecting first: only the free hook's
// collection may have shrunk it.
func heapInUseNow() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
