package daemon

import "runtime/debug"

// redisGCPercent is the GOGC used with the Redis backend. There the heap
// holds little but each request's garbage (a few MB live), so Go's default
// of 100 collects every few MB: under load a tenth of the CPU went to GC
// and to regrowing the stacks GC shrank. Five times a small live heap is
// still small; see docs/performance.md for the measurements.
const redisGCPercent = 400

// tuneGC applies the backend's GOGC (backend.gcPercent: redisGCPercent,
// or Go's default for the embedded store, which keeps every key in the
// heap) unless GOGC is set, which always wins.
func tuneGC(set settings, lookup func(string) (string, bool)) (applied bool) {
	_, userSet := lookup("GOGC")
	pct := set.backend().gcPercent()
	if userSet || pct == 0 {
		return false
	}
	debug.SetGCPercent(pct)
	return true
}
