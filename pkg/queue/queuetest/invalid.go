package queuetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// testInvalid: every bad input is ErrInvalid (INVALID_ARGUMENT over gRPC)
// and changes nothing.
func testInvalid(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "keep", Payload: []byte("k")})
	held := claim(t, q, "q", 1, time.Minute)[0]
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "wait"})
	c := ctx(t)
	enq := func(r queue.EnqueueRequest) func() error {
		return func() error { _, err := q.Enqueue(c, r); return err }
	}
	clm := func(r queue.ClaimRequest) func() error {
		return func() error { _, err := q.Claim(c, r); return err }
	}
	cases := map[string]func() error{
		"empty queue":          enq(queue.EnqueueRequest{ID: "n1"}),
		"queue with braces":    enq(queue.EnqueueRequest{Queue: "a{b}", ID: "n2"}),
		"queue too long":       enq(queue.EnqueueRequest{Queue: strings.Repeat("q", queue.MaxQueueName+1), ID: "n3"}),
		"id too long":          enq(queue.EnqueueRequest{Queue: "q", ID: strings.Repeat("i", queue.MaxID+1)}),
		"negative delay":       enq(queue.EnqueueRequest{Queue: "q", ID: "n4", Delay: -time.Second}),
		"delay too long":       enq(queue.EnqueueRequest{Queue: "q", ID: "n5", Delay: queue.MaxDelay + time.Second}),
		"payload over cap":     enq(queue.EnqueueRequest{Queue: "q", ID: "n6", Payload: make([]byte, queue.MaxPayload+1)}),
		"delay and deliver_at": enq(queue.EnqueueRequest{Queue: "q", ID: "n7", Delay: time.Second, DeliverAt: start.Add(time.Minute)}),
		"deliver_at too far":   enq(queue.EnqueueRequest{Queue: "q", ID: "n8", DeliverAt: start.Add(queue.MaxDelay + time.Hour)}),
		"claim empty queue":    clm(queue.ClaimRequest{Max: 1}),
		"claim max 0":          clm(queue.ClaimRequest{Queue: "q"}),
		"claim max over cap":   clm(queue.ClaimRequest{Queue: "q", Max: queue.MaxClaim + 1}),
		"claim negative vis":   clm(queue.ClaimRequest{Queue: "q", Max: 1, Visibility: -time.Second}),
		"claim vis over cap":   clm(queue.ClaimRequest{Queue: "q", Max: 1, Visibility: queue.MaxVisibility + time.Second}),
		"claim wait over cap":  clm(queue.ClaimRequest{Queue: "q", Max: 1, Wait: queue.MaxWait + time.Second}),
		"claim negative wait":  clm(queue.ClaimRequest{Queue: "q", Max: 1, Wait: -time.Second}),
		"ack empty receipt":    func() error { return q.Ack(c, "q", "keep", "") },
		"ack empty id":         func() error { return q.Ack(c, "q", "", held.Receipt) },
		"ack empty queue":      func() error { return q.Ack(c, "", "keep", held.Receipt) },
		"nack negative delay":  func() error { _, err := q.Nack(c, "q", "keep", held.Receipt, -time.Second); return err },
		"extend negative":      func() error { _, err := q.Extend(c, "q", "keep", held.Receipt, -time.Second); return err },
		"extend over cap": func() error {
			_, err := q.Extend(c, "q", "keep", held.Receipt, queue.MaxVisibility+time.Second)
			return err
		},
		"nack delay over the cap": func() error { _, err := q.Nack(c, "q", "keep", held.Receipt, queue.MaxDelay+time.Second); return err },
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// Nothing changed: "wait" is the only due message, "keep" is still held
	// by its receipt, and no rejected id was added.
	msgs := claim(t, q, "q", 100, time.Minute)
	wantIDs(t, "after invalid calls", msgs, "wait")
	if msgs[0].Attempt != 1 {
		t.Fatalf("attempt %d", msgs[0].Attempt)
	}
	ack(t, q, "q", held)
	ack(t, q, "q", msgs[0])
}
