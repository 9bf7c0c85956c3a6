package queuetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/queue"
)

// testDueOrder: nothing is handed out before its due time, and due
// messages come oldest due first, ties by id.
func testDueOrder(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	for _, e := range []struct {
		id    string
		delay time.Duration
	}{{"c", 2 * time.Second}, {"b", time.Second}, {"a", 2 * time.Second}, {"z", 0}} {
		res := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: e.id, Payload: []byte("body-" + e.id), Delay: e.delay})
		if res.ID != e.id || res.Duplicate || !res.DeliverAt.Equal(start.Add(e.delay)) {
			t.Fatalf("Enqueue(%s): %+v, want due %s", e.id, res, start.Add(e.delay))
		}
	}
	steps := []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{"z"}},
		{999 * time.Millisecond, nil},
		{time.Millisecond, []string{"b"}},
		{time.Second, []string{"a", "c"}},
		{time.Hour, nil},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		msgs := claim(t, q, "q", 10, time.Minute)
		wantIDs(t, fmt.Sprintf("step %d", i), msgs, s.want...)
		for _, m := range msgs {
			if !bytes.Equal(m.Payload, []byte("body-"+m.ID)) || m.Attempt != 1 || m.Receipt == "" {
				t.Fatalf("step %d: message %+v", i, m)
			}
			if !m.VisibleAt.Equal(clock.Now().Add(time.Minute)) {
				t.Fatalf("step %d: visible at %s, want %s", i, m.VisibleAt, clock.Now().Add(time.Minute))
			}
			ack(t, q, "q", m)
		}
	}
}

func testMaxMessages(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	for i := range 7 {
		enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: fmt.Sprintf("m%d", i)})
	}
	wantIDs(t, "first 3", claim(t, q, "q", 3, time.Minute), "m0", "m1", "m2")
	wantIDs(t, "next 3", claim(t, q, "q", 3, time.Minute), "m3", "m4", "m5")
	wantIDs(t, "last", claim(t, q, "q", 3, time.Minute), "m6")
	wantIDs(t, "none left", claim(t, q, "q", 3, time.Minute))
}

func testGeneratedID(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	a := enqueue(t, q, queue.EnqueueRequest{Queue: "q", Payload: []byte("x")})
	b := enqueue(t, q, queue.EnqueueRequest{Queue: "q", Payload: []byte("x")})
	if a.ID == "" || b.ID == "" || a.ID == b.ID || a.Duplicate || b.Duplicate {
		t.Fatalf("generated ids %+v %+v: want two distinct, non-duplicate", a, b)
	}
	if got := claim(t, q, "q", 10, time.Minute); len(got) != 2 {
		t.Fatalf("claimed %d, want both", len(got))
	}
}

func testDeliverAt(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	cases := []struct {
		id      string
		at, due time.Time
	}{
		{"future", start.Add(90 * time.Second), start.Add(90 * time.Second)},
		// A time already passed is due now, not ahead of older messages.
		{"past", start.Add(-time.Hour), start},
	}
	for _, c := range cases {
		res := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: c.id, DeliverAt: c.at})
		if !res.DeliverAt.Equal(c.due) {
			t.Fatalf("%s: due %s, want %s", c.id, res.DeliverAt, c.due)
		}
	}
	wantIDs(t, "at start", claim(t, q, "q", 10, time.Hour), "past")
	clock.Advance(89 * time.Second)
	wantIDs(t, "1 s early", claim(t, q, "q", 10, time.Hour))
	clock.Advance(time.Second)
	msgs := claim(t, q, "q", 10, time.Hour)
	wantIDs(t, "on time", msgs, "future")
	if !msgs[0].DeliverAt.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("DeliverAt %s", msgs[0].DeliverAt)
	}
}

func testDuplicate(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	first := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x", Payload: []byte("one"), Delay: time.Second})
	dup := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x", Payload: []byte("two")})
	if !dup.Duplicate || dup.ID != "x" || !dup.DeliverAt.Equal(first.DeliverAt) {
		t.Fatalf("duplicate while waiting: %+v (first %+v)", dup, first)
	}
	wantIDs(t, "duplicate did not make it due", claim(t, q, "q", 10, time.Minute))
	clock.Advance(time.Second)
	msgs := claim(t, q, "q", 10, time.Minute)
	wantIDs(t, "one copy", msgs, "x")
	if string(msgs[0].Payload) != "one" {
		t.Fatalf("payload %q, want the first", msgs[0].Payload)
	}
	if dup := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x"}); !dup.Duplicate {
		t.Fatalf("duplicate while in flight: %+v", dup)
	}
	ack(t, q, "q", msgs[0])
	if again := enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x", Payload: []byte("three")}); again.Duplicate {
		t.Fatalf("after ack the id is free again: %+v", again)
	}
	msgs = claim(t, q, "q", 10, time.Minute)
	wantIDs(t, "re-added", msgs, "x")
	if string(msgs[0].Payload) != "three" || msgs[0].Attempt != 1 {
		t.Fatalf("re-added message %+v", msgs[0])
	}
}

// testRedelivery: an unacked claim comes back after its visibility timeout
// with attempt+1, due at the deadline it passed, with a new receipt.
func testRedelivery(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x", Payload: []byte("p")})
	first := claim(t, q, "q", 1, 10*time.Second)
	wantIDs(t, "first", first, "x")
	clock.Advance(9999 * time.Millisecond)
	wantIDs(t, "still invisible", claim(t, q, "q", 1, 10*time.Second))
	clock.Advance(time.Millisecond)
	second := claim(t, q, "q", 1, 10*time.Second)
	wantIDs(t, "redelivered", second, "x")
	m := second[0]
	if m.Attempt != 2 || m.Receipt == first[0].Receipt || string(m.Payload) != "p" || !m.DeliverAt.Equal(first[0].VisibleAt) {
		t.Fatalf("redelivery %+v after %+v", m, first[0])
	}
	clock.Advance(10 * time.Second)
	third := claim(t, q, "q", 1, 10*time.Second)
	if len(third) != 1 || third[0].Attempt != 3 {
		t.Fatalf("third delivery %+v", third)
	}
	ack(t, q, "q", third[0])
	clock.Advance(time.Hour)
	wantIDs(t, "acked stays gone", claim(t, q, "q", 1, 10*time.Second))
}

func testStaleReceipts(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x"})
	old := claim(t, q, "q", 1, time.Second)[0]
	clock.Advance(time.Second)
	cur := claim(t, q, "q", 1, time.Minute)[0]
	c := ctx(t)
	refusals := map[string]error{
		"ack":    q.Ack(c, "q", "x", old.Receipt),
		"forged": q.Ack(c, "q", "x", "forged"),
		"other":  q.Ack(c, "q", "y", cur.Receipt),
	}
	_, refusals["nack"] = q.Nack(c, "q", "x", old.Receipt, 0)
	_, refusals["extend"] = q.Extend(c, "q", "x", old.Receipt, time.Hour)
	for what, err := range refusals {
		if !errors.Is(err, queue.ErrReceipt) {
			t.Errorf("%s with a stale receipt: %v, want ErrReceipt", what, err)
		}
	}
	// Nothing changed: the current claim still holds and expires on time.
	clock.Advance(59 * time.Second)
	wantIDs(t, "still in flight", claim(t, q, "q", 1, time.Minute))
	ack(t, q, "q", cur)
	if err := q.Ack(c, "q", "x", cur.Receipt); !errors.Is(err, queue.ErrReceipt) {
		t.Fatalf("second ack: %v, want ErrReceipt", err)
	}
}

func testNack(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x"})
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "y", Delay: 3 * time.Second})
	m := claim(t, q, "q", 1, time.Minute)[0]
	due, err := q.Nack(ctx(t), "q", "x", m.Receipt, 5*time.Second)
	if err != nil || !due.Equal(start.Add(5*time.Second)) {
		t.Fatalf("Nack: %s, %v", due, err)
	}
	if err := q.Ack(ctx(t), "q", "x", m.Receipt); !errors.Is(err, queue.ErrReceipt) {
		t.Fatalf("ack after nack: %v, want ErrReceipt", err)
	}
	clock.Advance(3 * time.Second)
	wantIDs(t, "y first", claim(t, q, "q", 10, time.Minute), "y")
	clock.Advance(2 * time.Second)
	back := claim(t, q, "q", 10, time.Minute)
	wantIDs(t, "nacked back", back, "x")
	if back[0].Attempt != 2 || !back[0].DeliverAt.Equal(due) {
		t.Fatalf("after nack: %+v", back[0])
	}
	// Zero delay: due at once.
	if _, err := q.Nack(ctx(t), "q", "x", back[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "nack 0", claim(t, q, "q", 10, time.Minute), "x")
}

func testExtend(t *testing.T, f Factory) {
	q, clock := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "q", ID: "x"})
	m := claim(t, q, "q", 1, 5*time.Second)[0]
	clock.Advance(4 * time.Second)
	at, err := q.Extend(ctx(t), "q", "x", m.Receipt, 10*time.Second)
	if err != nil || !at.Equal(start.Add(14*time.Second)) {
		t.Fatalf("Extend: %s, %v", at, err)
	}
	clock.Advance(9 * time.Second)
	wantIDs(t, "extended", claim(t, q, "q", 1, time.Minute))
	// The receipt survives an extension.
	if _, err := q.Extend(ctx(t), "q", "x", m.Receipt, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	back := claim(t, q, "q", 1, time.Minute)
	if len(back) != 1 || back[0].Attempt != 2 {
		t.Fatalf("after extension expired: %+v", back)
	}
}

func testIndependent(t *testing.T, f Factory) {
	q, _ := fresh(t, f)
	enqueue(t, q, queue.EnqueueRequest{Queue: "a", ID: "x", Payload: []byte("a")})
	enqueue(t, q, queue.EnqueueRequest{Queue: "b", ID: "x", Payload: []byte("b")})
	for _, name := range []string{"a", "b"} {
		msgs := claim(t, q, name, 10, time.Minute)
		if len(msgs) != 1 || string(msgs[0].Payload) != name {
			t.Fatalf("queue %s: %+v", name, msgs)
		}
		if err := q.Ack(ctx(t), map[string]string{"a": "b", "b": "a"}[name], "x", msgs[0].Receipt); !errors.Is(err, queue.ErrReceipt) {
			t.Fatalf("receipt of %s accepted by the other queue: %v", name, err)
		}
		ack(t, q, name, msgs[0])
	}
}
