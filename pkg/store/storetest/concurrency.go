package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

const (
	goroutines = 200
	concLimit  = 100
)

func testConcurrency(t *testing.T, newStore Factory) {
	forEachAlgorithm(t, newStore, func(t *testing.T, h *harness, a algorithms.Algorithm) {
		h.at(5 * time.Second)
		one := basic(a, concLimit)
		// The clock stands still, so a fresh key admits exactly its capacity
		// no matter how the 200 takes interleave.
		if n := race(t, h, func(int) []store.Request { return reqs(req("one", one, 1)) }); n != concLimit {
			t.Errorf("single key: %d of %d takes allowed, want %d", n, goroutines, concLimit)
		}
		if d := h.takeRaw(reqs(req("one", one, 0)))[0]; d.Remaining != 0 {
			t.Errorf("single key after the race: %s, want remaining 0", fmtDecision(d))
		}

		// Every batch charges both keys; "b" has room for 150, so it must end
		// with exactly 50 left: a batch denied by "a" that still charged "b"
		// shows up here. Half the batches name the keys in the other order to
		// catch a store that locks keys in request order and deadlocks.
		la, lb := basic(a, concLimit), basic(a, concLimit+50)
		n := race(t, h, func(i int) []store.Request {
			if i%2 == 0 {
				return reqs(req("a", la, 1), req("b", lb, 1))
			}
			return reqs(req("b", lb, 1), req("a", la, 1))
		})
		if n != concLimit {
			t.Errorf("two-key batches: %d of %d allowed, want %d", n, goroutines, concLimit)
		}
		checks := h.takeRaw(reqs(req("a", la, 0), req("b", lb, 0)))
		if checks[0].Remaining != 0 || checks[1].Remaining != 50 {
			t.Errorf("after two-key batches: a %s, b %s; want remaining 0 and 50", fmtDecision(checks[0]), fmtDecision(checks[1]))
		}
	})
}

// race starts all goroutines at once, each taking batch(i), and returns how
// many batches were allowed in full. It bypasses the model, which is not
// safe for concurrent use; callers check the outcome by hand.
func race(t *testing.T, h *harness, batch func(i int) []store.Request) int {
	t.Helper()
	var (
		allowed atomic.Int64
		start   = make(chan struct{})
		wg      sync.WaitGroup
		errs    = make(chan error, goroutines)
	)
	for i := range goroutines {
		wg.Go(func() {
			rs := batch(i)
			<-start
			res, err := h.s.Take(t.Context(), rs)
			if err != nil {
				errs <- err
				return
			}
			ok := len(res) == len(rs)
			for _, r := range res {
				ok = ok && r.Allowed
			}
			if ok {
				allowed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Take: %v", err)
	}
	return int(allowed.Load())
}
