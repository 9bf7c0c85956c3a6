package testkit

import (
	"testing"
	"time"
)

// Slack is the least a test allows past a time bound it checks, such as a
// deadline that must end a call: on a shared, loaded box a goroutine can
// stall for hundreds of milliseconds. A test that must tell two bounds
// apart (the caller's deadline from REDIS_TIMEOUT) sets them more than
// Slack apart; speed itself is for benchmarks.
const Slack = time.Second

// WaitFor polls cond until it holds and fails t if within passes first. It
// is for state another process or goroutine reaches in its own time (a port
// answering, a file reloaded, a Redis back); time a test controls is better
// stepped with a Clock or testing/synctest than waited for.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// WaitForNil is WaitFor for a try that says why it failed: the last error
// is in the failure message.
func WaitForNil(t testing.TB, within time.Duration, what string, try func() error) {
	t.Helper()
	var last error
	if !poll(within, func() bool { last = try(); return last == nil }) {
		t.Fatalf("timed out after %s waiting for %s: %v", within, what, last)
	}
}

func poll(within time.Duration, try func() bool) bool {
	deadline := time.Now().Add(within)
	// Fast at first, so that a state reached at once costs little; backing
	// off, so that a slow one does not load the shared machine.
	pause := time.Millisecond
	for {
		if try() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
