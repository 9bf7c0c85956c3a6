package main

import "runtime/debug"

// redisGCPercent is the GOGC used with the Redis backend. There the heap
// holds little but each request's garbage (a few MB live), so Go's default
// of 100 collects every few MB: under load a tenth of the CPU went to GC
// and to regrowing the stacks GC shrank. Five times a small live heap is
// still small; see docs/performance.md for the measurements.
const redisGCPercent = 400

// tuneGC applies redisGCPercent unless GOGC is set, which always wins. The
// embedded store keeps every key in the heap, so it keeps Go's default.
func tuneGC(set settings, lookup func(string) (string, bool)) (applied bool) {
	if _, ok := lookup("GOGC"); ok || set.Backend != backendRedis {
		return false
	}
	debug.SetGCPercent(redisGCPercent)
	return true
}
