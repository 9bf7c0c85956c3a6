// Package fakeclock is the one fake clock of the tests and of the public
// conformance suites (storetest.Clock is this one, queuetest's and
// rlqstest's wrap it): code under test reads time through a now func()
// time.Time option, or schedules with AfterFunc, and the test steps the
// clock instead of sleeping.
package fakeclock

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is a fake clock a test steps. Moving it forward runs the AfterFunc
// timers that fall due, in order, each at its own time, on the goroutine
// that moves it. It is safe for concurrent use: the code under test may
// read it from its own goroutines, and several may step it, each step
// moving it by exactly what it asked (a timer may read the clock or
// schedule another, but not step it). The zero Clock reads the zero time.
type Clock struct {
	// stepping is held by Set and Advance from start to end: a step that
	// runs a timer releases mu, and another step computed from the time
	// in between, or ending before it, would lose time.
	stepping sync.Mutex
	mu       sync.Mutex
	now      time.Time
	timers   timerHeap
	seq      uint64 // orders timers due at the same time by creation
}

// New returns a Clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's current time; pass the method value (clock.Now) to a
// clock option.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards or forwards (running the timers due
// by t).
func (c *Clock) Set(t time.Time) {
	c.stepping.Lock()
	defer c.stepping.Unlock()
	c.mu.Lock()
	c.runUntil(t)
}

// Advance moves the clock forward by d, running the timers due by then.
func (c *Clock) Advance(d time.Duration) {
	c.stepping.Lock()
	defer c.stepping.Unlock()
	c.mu.Lock()
	c.runUntil(c.now.Add(d))
}

// runUntil, called with c.mu held, runs the timers due by end in order,
// the clock reading each one's time while it runs, and leaves the clock at
// end. It releases c.mu, and holds it not while a timer runs, so that the
// timer may read the clock or schedule another.
func (c *Clock) runUntil(end time.Time) {
	for len(c.timers) > 0 && !c.timers[0].at.After(end) {
		t := heap.Pop(&c.timers).(*Timer)
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

// AfterFunc calls f once the clock has moved d past now (time.AfterFunc's
// contract on this clock's time), on the goroutine that moves it.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &Timer{c: c, at: c.now.Add(max(d, 0)), f: f, seq: c.seq}
	heap.Push(&c.timers, t)
	return t
}

// Timer is a pending AfterFunc.
type Timer struct {
	c     *Clock
	at    time.Time
	f     func()
	seq   uint64
	index int // in c.timers, -1 once out of it
	fired bool
}

// Stop cancels the call; false if it already ran or was stopped.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired || t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

// timerHeap orders timers by when they are due, then by creation.
type timerHeap []*Timer

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
	t := x.(*Timer)
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
