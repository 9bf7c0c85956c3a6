package queue_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// TestShutdownEndsLongPolls: Shutdown answers waiting claims at once.
func TestShutdownEndsLongPolls(t *testing.T) {
	b := queue.NewBroker(memqueue.New())
	done := make(chan error, 1)
	go func() {
		_, err := b.Claim(context.Background(), queue.ClaimRequest{Queue: "q", Max: 1, Wait: 20 * time.Second})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	b.Shutdown()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll survived Shutdown")
	}
}

// TestMetrics: per-queue gauges and redeliveries, and the label cap.
func TestMetrics(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
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
	clock.now = clock.now.Add(3 * time.Second)
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
func TestIdleLongPollsShareOneClaim(t *testing.T) {
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
	deadline := time.Now().Add(5 * time.Second)
	for st.count() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the first poll record the queue as idle
	for range 9 {
		go poll()
	}
	time.Sleep(50 * time.Millisecond)
	if n := st.count(); n != 1 {
		t.Fatalf("10 long polls on an idle queue made %d store claims, want 1", n)
	}
	if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0].ID != "x" {
			t.Fatalf("woken poll got %+v", msgs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no long poll woke on enqueue")
	}
	if n := st.count(); n > 3 {
		t.Fatalf("one enqueue cost %d store claims", n-1)
	}
}
