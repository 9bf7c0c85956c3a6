package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestConformanceBatched runs the conformance suite with batching forced
// on: beside each store, background callers keep a pipeline in flight, so
// the suite's takes queue behind it and go out merged with theirs (and
// with each other's, in its concurrent cases) into shared script calls.
// Every answer and stored state the suite checks must still be what it
// is alone.
func TestConformanceBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole suite under background load")
	}
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	var background atomic.Int64
	scripts0 := scriptRuns(t, admin)
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) store.Store {
		if err := admin.FlushAll(t.Context()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
		s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now),
			redisstore.WithPipeline(time.Millisecond, 0))
		stop := keepInFlight(s, &background)
		t.Cleanup(stop)
		return s
	})
	scripts := scriptRuns(t, admin) - scripts0
	t.Logf("%d script calls for %d background takes and the suite's", scripts, background.Load())
	if int64(scripts) >= background.Load() {
		t.Errorf("%d script calls for %d background takes alone: nothing merged", scripts, background.Load())
	}
}

// keepInFlight starts callers that take from their own counters (outside
// every key the suite uses) until stop is called, counting their takes.
// A call is never canceled midway (its connection would be closed).
func keepInFlight(s *redisstore.Store, n *atomic.Int64) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Go(func() {
			key := "{batched-background}:" + strconv.Itoa(c)
			for !done.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if _, err := s.Take(ctx, []store.Request{{Key: key, Limit: window(1 << 40), Hits: 1}}); err == nil {
					n.Add(1)
				}
				cancel()
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}
