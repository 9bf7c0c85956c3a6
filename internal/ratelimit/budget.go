package ratelimit

import (
	"context"
	"sync"
)

// DefaultDecodeBudget bounds the bytes of requests being decoded at once.
const DefaultDecodeBudget = 64 << 20

// byteBudget is a weighted semaphore over bytes: requests larger than the
// whole budget are charged the whole budget, so they run alone rather than
// never.
type byteBudget struct {
	mu    sync.Mutex
	total int64
	avail int64
	// wake is closed, and replaced, by a release while acquirers wait on
	// it (waiting of them): every request releases, and a new channel each
	// time cost an allocation per request.
	wake    chan struct{}
	waiting int
}

func newByteBudget(total int64) *byteBudget {
	return &byteBudget{total: total, avail: total, wake: make(chan struct{})}
}

// acquire takes n bytes, waiting until they are free or ctx ends; it
// returns what to pass to release.
func (b *byteBudget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), b.total)
	for {
		b.mu.Lock()
		if b.avail >= n {
			b.avail -= n
			b.mu.Unlock()
			return n, nil
		}
		wake := b.wake
		b.waiting++
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			b.mu.Lock()
			if wake == b.wake { // not released since: still counted
				b.waiting--
			}
			b.mu.Unlock()
			return 0, ctx.Err()
		}
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.avail += n
	if b.waiting > 0 {
		close(b.wake)
		b.wake, b.waiting = make(chan struct{}), 0
	}
	b.mu.Unlock()
}
