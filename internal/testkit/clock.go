package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock a test steps; code under test reads it through a
// now func() time.Time option (pass clock.Now). It is safe for concurrent
// use: the code under test may read it from its own goroutines.
// (storetest.Clock and queuetest.Clock are the conformance suites' own,
// exported to store implementers.)
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
