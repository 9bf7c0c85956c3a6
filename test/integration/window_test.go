package integration

import (
	"testing"
	"time"
)

// roomInWindow returns once at least room remains of the current window of
// length window, waiting for the next window when less does. Fixed windows
// start at multiples of their length since the Unix epoch, in the binary
// and in Redis alike (Redis TIME is the host's clock here), so a test whose
// steps must share one window, and not straddle a reset that would zero its
// counters, asks for the time those steps need on a loaded machine; room of
// a whole window or more waits for the next window's start. It waits at
// most room, and only when the window is that near its end.
//
// It is the integration tests' one way of meeting a window boundary: time
// in the binary is the host's, which a test cannot step.
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
