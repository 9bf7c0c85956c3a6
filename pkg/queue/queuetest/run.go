// Package queuetest is the conformance suite every queue.Queue passes: the
// memory and Redis stores behind a Broker, and the same through the gRPC
// API. Time is a fake clock the suite steps; only the long-poll cases wait
// for real time, and only for milliseconds.
package queuetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// Clock is the time stores under test read: a fake clock the suite steps,
// or the real clock for the cases about waking at a due time.
type Clock struct {
	// fake is nil on the real clock.
	fake    *fakeclock.Clock
	mu      sync.Mutex
	watched *WatchedStore
}

// Now is the clock's time; pass the method value to a store's clock option.
func (c *Clock) Now() time.Time {
	if c.fake == nil {
		return time.Now()
	}
	return c.fake.Now()
}

// Advance steps a fake clock.
func (c *Clock) Advance(d time.Duration) { c.fake.Advance(d) }

// Watch wraps the store behind the queue under test (see the package
// function Watch), so that the long-poll cases wait until a claim is
// waiting instead of for a while; a factory must pass its store through it.
func (c *Clock) Watch(st queue.Store, subscribes bool) queue.Store {
	w := Watch(st, subscribes)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watched = w
	return w
}

// waiting reports whether a long poll on the watched store waits for a
// notification; it fails t when the factory did not call Watch.
func (c *Clock) waiting(t *testing.T) func() bool {
	t.Helper()
	c.mu.Lock()
	w := c.watched
	c.mu.Unlock()
	if w == nil {
		t.Fatal("queuetest: the factory did not pass its store through Clock.Watch")
	}
	return w.Waiting
}

// Factory returns a fresh, empty queue reading time from clock, its store
// passed through clock.Watch; the factory releases it when t ends.
type Factory func(t *testing.T, clock *Clock) queue.Queue

// start is a fixed, millisecond-aligned instant, as stores keep milliseconds.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fresh(t *testing.T, f Factory) (queue.Queue, *Clock) {
	t.Helper()
	c := &Clock{fake: fakeclock.New(start)}
	return f(t, c), c
}

// Run runs the whole suite against queues from f.
func Run(t *testing.T, f Factory) {
	t.Run("due_order", func(t *testing.T) { testDueOrder(t, f) })
	t.Run("max_messages", func(t *testing.T) { testMaxMessages(t, f) })
	t.Run("generated_id", func(t *testing.T) { testGeneratedID(t, f) })
	t.Run("deliver_at", func(t *testing.T) { testDeliverAt(t, f) })
	t.Run("duplicate", func(t *testing.T) { testDuplicate(t, f) })
	t.Run("visibility_redelivery", func(t *testing.T) { testRedelivery(t, f) })
	t.Run("stale_receipts", func(t *testing.T) { testStaleReceipts(t, f) })
	t.Run("nack", func(t *testing.T) { testNack(t, f) })
	t.Run("extend", func(t *testing.T) { testExtend(t, f) })
	t.Run("queues_independent", func(t *testing.T) { testIndependent(t, f) })
	t.Run("invalid_input", func(t *testing.T) { testInvalid(t, f) })
	t.Run("concurrent_claims", func(t *testing.T) { testConcurrentClaims(t, f) })
	t.Run("long_poll_enqueue", func(t *testing.T) { testLongPollEnqueue(t, f) })
	t.Run("long_poll_expires", func(t *testing.T) { testLongPollExpires(t, f) })
	t.Run("long_poll_due_time", func(t *testing.T) { testLongPollDue(t, f) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func enqueue(t *testing.T, q queue.Queue, req queue.EnqueueRequest) queue.EnqueueResult {
	t.Helper()
	res, err := q.Enqueue(ctx(t), req)
	if err != nil {
		t.Fatalf("Enqueue(%+v): %v", req, err)
	}
	return res
}

func claim(t *testing.T, q queue.Queue, name string, max int, vis time.Duration) []queue.Message {
	t.Helper()
	msgs, err := q.Claim(ctx(t), queue.ClaimRequest{Queue: name, Max: max, Visibility: vis})
	if err != nil {
		t.Fatalf("Claim(%s, %d): %v", name, max, err)
	}
	return msgs
}

func ids(msgs []queue.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func wantIDs(t *testing.T, what string, msgs []queue.Message, want ...string) {
	t.Helper()
	got := ids(msgs)
	if len(got) != len(want) {
		t.Fatalf("%s: claimed %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: claimed %v, want %v", what, got, want)
		}
	}
}

func ack(t *testing.T, q queue.Queue, name string, m queue.Message) {
	t.Helper()
	if err := q.Ack(ctx(t), name, m.ID, m.Receipt); err != nil {
		t.Fatalf("Ack(%s): %v", m.ID, err)
	}
}
