package storetest

import (
	"sync"
	"time"
)

// Clock is a fake clock the suite steps; stores under test must read time
// from it so that no test waits for real time to pass. The zero Clock reads
// the zero time; the suite always sets it before use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	return &Clock{now: t}
}

// Now is the clock's current time; pass the method value (clock.Now) to a
// store's clock option.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards or forwards.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
