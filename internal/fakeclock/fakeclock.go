// Package fakeclock is the one fake clock of the tests and of the public
// conformance suites (storetest.Clock and queuetest's are this one): code
// under test reads time through a now func() time.Time option, and the
// test steps the clock instead of sleeping.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a fake clock a test steps. It is safe for concurrent use: the
// code under test may read it from its own goroutines. The zero Clock reads
// the zero time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
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
