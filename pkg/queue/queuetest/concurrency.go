package queuetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// testConcurrentClaims: claimers racing on one queue each get distinct
// messages, and together all of them.
func testConcurrentClaims(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	const n, workers = 200, 8
	for i := range n {
		enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: fmt.Sprintf("m%03d", i)})
	}
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	c := ctx(t)
	for range workers {
		wg.Go(func() {
			for {
				msgs, err := q.Claim(c, queue.ClaimRequest{Queue: "q", Max: 3, Visibility: time.Hour})
				if err != nil {
					errs <- err
					return
				}
				if len(msgs) == 0 {
					return
				}
				for _, m := range msgs {
					mu.Lock()
					got[m.ID]++
					mu.Unlock()
					if err := q.Ack(c, "q", m.ID, m.Receipt); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("claimed %d distinct messages, want %d", len(got), n)
	}
	for id, k := range got {
		if k != 1 {
			t.Fatalf("%s claimed %d times", id, k)
		}
	}
}

type claimed struct {
	msgs []queue.Message
	err  error
	at   time.Time
}

func claimAsync(q queue.Queue, req queue.ClaimRequest) <-chan claimed {
	ch := make(chan claimed, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), req.Wait+10*time.Second)
		defer cancel()
		msgs, err := q.Claim(c, req)
		ch <- claimed{msgs, err, time.Now()}
	}()
	return ch
}

// testLongPollEnqueue: a waiting Claim returns the message enqueued while it
// waits, long before its wait ends.
func testLongPollEnqueue(t *testing.T, f Factory) {
	q, c := fresh(t, f)
	ch := claimAsync(q, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 15 * time.Second})
	// Enqueue once the claim found the queue empty and waits: one that had
	// not claimed yet would find the message without being woken.
	testkit.WaitFor(t, 10*time.Second, "the long poll to wait on an empty queue", c.waiting(t))
	enqueued := time.Now()
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x"})
	select {
	case r := <-ch:
		if r.err != nil || len(r.msgs) != 1 || r.msgs[0].ID != "x" {
			t.Fatalf("woken claim: %+v, %v", r.msgs, r.err)
		}
		t.Logf("woken %s after the enqueue", r.at.Sub(enqueued))
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting claim did not wake on enqueue")
	}
}

// testLongPollExpires: with nothing due, Claim returns empty when wait ends.
func testLongPollExpires(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "later", Delay: time.Hour})
	began := time.Now()
	r := <-claimAsync(q, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 100 * time.Millisecond})
	if r.err != nil || len(r.msgs) != 0 {
		t.Fatalf("expired wait: %+v, %v", r.msgs, r.err)
	}
	if took := r.at.Sub(began); took < 100*time.Millisecond {
		t.Fatalf("returned after %s, before the wait ended", took)
	}
}

// testLongPollDue: on the real clock, a waiting Claim returns a message
// when it becomes due, woken by the queue's timer.
func testLongPollDue(t *testing.T, f Factory) {
	c := &Clock{} // the real clock
	q := f(t, c)
	res := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x", Delay: 300 * time.Millisecond})
	r := <-claimAsync(q, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 10 * time.Second})
	if r.err != nil || len(r.msgs) != 1 {
		t.Fatalf("claim at due time: %+v, %v", r.msgs, r.err)
	}
	late := r.at.Sub(res.DeliverAt)
	t.Logf("claimed %s after its due time", late)
	// Not a performance target: a bound that only a poll loop or a missed
	// wake-up (returning at the end of the wait) would break.
	if late < 0 || late > 2*time.Second {
		t.Fatalf("claimed %s after its due time", late)
	}
}
