package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	got, err := b.acquire(ctx, 60)
	if err != nil || got != 60 {
		t.Fatalf("acquire 60 of 100: %d %v", got, err)
	}
	// 60 + 60 > 100: the second waits, and gives up with its context.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(short, 60); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire over the budget: %v, want DeadlineExceeded", err)
	}
	if b.waiting != 0 {
		t.Fatalf("%d acquirers counted waiting after the only one gave up", b.waiting)
	}
	// A waiter is woken by a release.
	done := make(chan int64)
	go func() {
		n, _ := b.acquire(ctx, 60)
		done <- n
	}()
	select {
	case <-done:
		t.Fatal("acquired 60 while only 40 were free")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(got)
	select {
	case n := <-done:
		b.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("a release did not wake the waiter")
	}
	// More than the whole budget is charged the whole budget: it runs alone.
	if n, err := b.acquire(ctx, 1<<40); err != nil || n != 100 {
		t.Fatalf("acquire past the total: %d %v, want 100", n, err)
	}
	b.release(100)
	if n, err := b.acquire(ctx, 0); err != nil || n != 1 {
		t.Fatalf("acquire 0: %d %v, want 1", n, err)
	}
}
