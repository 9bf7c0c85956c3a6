// Package rlqstest holds what RLQS tests step through: a fake clock with
// timers, and Envoy, a client that behaves as Envoy's rate_limit_quota
// filter does.
package rlqstest

import (
	"container/heap"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/rlqs"
)

// Clock is a fake clock. Advance runs the timers that fall due, in order,
// each at its own time, on the caller's goroutine. Safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
}

var _ rlqs.Clock = (*Clock)(nil)

// NewClock is a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f when the clock has been advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) rlqs.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(max(d, 0)), f: f, seq: c.seq}
	heap.Push(&c.timers, t)
	return t
}

// Advance moves the clock forward by d, running every timer that falls due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for len(c.timers) > 0 && !c.timers[0].at.After(end) {
		t := heap.Pop(&c.timers).(*timer)
		t.fired = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

type timer struct {
	c     *Clock
	at    time.Time
	f     func()
	seq   uint64
	index int
	fired bool
}

// Stop cancels the timer.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired || t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
