// Package rlqstest holds what RLQS tests step through: a fake clock with
// timers, and Envoy, a client that behaves as Envoy's rate_limit_quota
// filter does.
package rlqstest

import (
	"time"

	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
)

// Clock is the project's fake clock (pkg/fakeclock) as an rlqs.Clock.
// Advance runs the timers that fall due, in order, each at its own time,
// on the caller's goroutine.
type Clock struct{ *fakeclock.Clock }

var _ rlqs.Clock = (*Clock)(nil)

// NewClock is a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{fakeclock.New(t)} }

// AfterFunc calls f when the clock has been advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) rlqs.Timer { return c.Clock.AfterFunc(d, f) }
