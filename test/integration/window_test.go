package integration

import (
	"testing"
	"time"
)

// roomInWindow returns once at least room remains of the current window of
// length window (windows start at multiples of their length since the
// epoch, in the binary and Redis alike), waiting at most room for the next
// one: the integration tests' one way of keeping steps that must share a
// window off its end, since a test cannot step the binary's clock.
func roomInWindow(t *testing.T, window, room time.Duration) {
	t.Helper()
	now := time.Now()
	left := now.Truncate(window).Add(window).Sub(now)
	if left >= room {
		return
	}
	if room < window {
		t.Logf("waiting %s for the next %s window", left.Round(time.Millisecond), window)
	}
	// A little past the boundary: the binary and Redis read the clock
	// after this process does.
	time.Sleep(left + 20*time.Millisecond)
}
