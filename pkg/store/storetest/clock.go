package storetest

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
)

// Clock is a fake clock the suite steps; stores under test must read time
// from it (pass clock.Now to their clock option) so that no test waits for
// real time to pass. It has Now, Set and Advance (and AfterFunc, whose
// timers run as the clock moves).
type Clock = fakeclock.Clock

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return fakeclock.New(t) }
