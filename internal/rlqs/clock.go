package rlqs

import "time"

// Clock is the server's time: when a report arrived, when a window's end
// is near. Tests step a fake one (rlqstest.Clock) so that a minute of
// reports runs in a fraction of a second; production uses the wall clock.
// Decisions themselves use the store's time (Redis TIME), never this one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; false if it already ran or was stopped.
	Stop() bool
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
