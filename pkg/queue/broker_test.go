package queue_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
)

// TestShutdownEndsLongPolls: Shutdown answers waiting claims at once. In a
// synctest bubble, so that the claim is known to be waiting (not yet to
// start) when Shutdown comes, and "at once" means before any time passes.
func TestShutdownEndsLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := queue.NewBroker(memqueue.New())
		// Ends a poll that survived Shutdown, which the bubble must not
		// outlive.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := b.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 20 * time.Second})
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("long poll on an empty queue returned before Shutdown: %v", err)
		default:
		}
		start := time.Now()
		b.Shutdown()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("long poll survived Shutdown")
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("Shutdown ended the long poll after %s, want at once", waited)
		}
	})
}

// TestMetrics: per-queue gauges and redeliveries, and the label cap.
func TestMetrics(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memqueue.New(memqueue.WithClock(clock.Now))
	m := queue.NewMetrics(st, 2, time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	b := queue.NewBroker(st, queue.WithMetrics(m))
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", "d"} {
		for _, id := range []string{"1", "2", "3"} {
			if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: name, ID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"a", "c", "d"} {
		if _, err := b.Claim(ctx, queue.ClaimRequest{Queue: name, Max: 1, Visibility: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(3 * time.Second)
	for _, name := range []string{"a", "c", "d"} {
		if _, err := b.Claim(ctx, queue.ClaimRequest{Queue: name, Max: 3, Visibility: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP ratelimitd_queue_depth Messages waiting (due or not).
# TYPE ratelimitd_queue_depth gauge
ratelimitd_queue_depth{queue="a"} 0
ratelimitd_queue_depth{queue="b"} 3
# HELP ratelimitd_queue_in_flight Messages claimed and not yet acked.
# TYPE ratelimitd_queue_in_flight gauge
ratelimitd_queue_in_flight{queue="a"} 3
ratelimitd_queue_in_flight{queue="b"} 0
# HELP ratelimitd_queue_oldest_due_lag_seconds How long the oldest due message has waited past its due time.
# TYPE ratelimitd_queue_oldest_due_lag_seconds gauge
ratelimitd_queue_oldest_due_lag_seconds{queue="a"} 0
ratelimitd_queue_oldest_due_lag_seconds{queue="b"} 3
# HELP ratelimitd_queue_redeliveries_total Messages handed out again (attempt > 1) after a visibility timeout or a nack.
# TYPE ratelimitd_queue_redeliveries_total counter
ratelimitd_queue_redeliveries_total{queue="_other"} 2
ratelimitd_queue_redeliveries_total{queue="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"ratelimitd_queue_depth", "ratelimitd_queue_in_flight", "ratelimitd_queue_oldest_due_lag_seconds", "ratelimitd_queue_redeliveries_total"); err != nil {
		t.Fatal(err)
	}
}

// countingStore counts the claims that reach the store.
type countingStore struct {
	queue.Store
	mu     sync.Mutex
	claims int
}

func (c *countingStore) Claim(ctx context.Context, req queue.ClaimRequest) (queue.ClaimResult, error) {
	c.mu.Lock()
	c.claims++
	c.mu.Unlock()
	return c.Store.Claim(ctx, req)
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims
}

// TestIdleLongPollsShareOneClaim: long polls joining a queue already known
// to be empty wait without asking the store; an enqueue wakes one of them.
// In a synctest bubble: synctest.Wait returns once every poll is blocked
// waiting, so the claims are counted after all ten polls have begun, not
// before some of them have run.
func TestIdleLongPollsShareOneClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingStore{Store: memqueue.New()}
		b := queue.NewBroker(st)
		got := make(chan []queue.Message, 10)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		poll := func() {
			msgs, _ := b.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 10 * time.Second})
			got <- msgs
		}
		go poll()
		synctest.Wait() // the first poll has found the queue empty
		if n := st.count(); n != 1 {
			t.Fatalf("one long poll on an empty queue made %d store claims, want 1", n)
		}
		for range 9 {
			go poll()
		}
		synctest.Wait()
		if n := st.count(); n != 1 {
			t.Fatalf("10 long polls on an idle queue made %d store claims, want 1", n)
		}
		if len(got) != 0 {
			t.Fatalf("%d long polls on an empty queue returned", len(got))
		}
		if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: "x"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case msgs := <-got:
			if len(msgs) != 1 || msgs[0].ID != "x" {
				t.Fatalf("woken poll got %+v", msgs)
			}
		default:
			t.Fatal("no long poll woke on enqueue")
		}
		if len(got) != 0 {
			t.Fatalf("one enqueue ended %d more long polls", len(got))
		}
		if n := st.count(); n > 3 {
			t.Fatalf("one enqueue cost %d store claims", n-1)
		}
		cancel()
		synctest.Wait()
	})
}
