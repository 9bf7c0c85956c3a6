package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// TestSendersLiveOnAndEnd: queued calls go out on senders that, their batch
// sent, wait for the next (instead of a goroutine per batch), no more than
// maxIdleSenders of them; close ends those waiting. Every call is answered.
func TestSendersLiveOnAndEnd(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 8})
	t.Cleanup(func() { _ = c.Close() })
	s := defaults()
	// A window far below a round trip: several pipelines in flight at once,
	// so more senders start than may wait.
	s.pipelineWindow = 20 * time.Microsecond
	s.conn.Timeout = 5 * time.Second
	co := newCoalescer(s, c.Pipeline)
	c.AddHook(co)

	const callers, calls = 32, 40
	var wg sync.WaitGroup
	failed := make(chan error, callers*calls)
	for range callers {
		wg.Go(func() {
			for range calls {
				n, err := c.Eval(t.Context(), "return 7", nil).Int()
				if err == nil && n != 7 {
					t.Errorf("EVAL answered %d, want 7", n)
				}
				if err != nil {
					failed <- err
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Errorf("a pipelined call failed: %v", err)
	}
	// The last senders count themselves idle just after their callers
	// have their answers.
	waitIdle(t, co, func(n int32) bool { return n >= 1 && n <= maxIdleSenders }, "1 to 4")
	co.close()
	waitIdle(t, co, func(n int32) bool { return n == 0 }, "none after close")
}

func waitIdle(t *testing.T, co *coalescer, ok func(int32) bool, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !ok(co.idle.Load()) {
		select {
		case <-ctx.Done():
			t.Fatalf("%d senders wait for a batch, want %s", co.idle.Load(), want)
		case <-time.After(time.Millisecond):
		}
	}
}
