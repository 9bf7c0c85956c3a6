package redisstore

import (
	"sync"
	"testing"
	"time"
)

// A burst of failing calls reloads the topology once per interval, not
// once per call.
func TestRefreshIsRateLimited(t *testing.T) {
	var mu sync.Mutex
	reloads := 0
	r := &refresher{interval: 100 * time.Millisecond, reload: func() {
		mu.Lock()
		reloads++
		mu.Unlock()
	}}
	burst := func() {
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() { defer wg.Done(); r.trigger() }()
		}
		wg.Wait()
	}
	burst()
	if reloads != 1 {
		t.Fatalf("a burst of 200 failures reloaded %d times, want 1", reloads)
	}
	// The interval is measured against the last reload: step it back
	// rather than sleeping.
	r.mu.Lock()
	r.last = r.last.Add(-r.interval)
	r.mu.Unlock()
	burst()
	if reloads != 2 {
		t.Fatalf("after the interval: %d reloads, want 2", reloads)
	}
}
