package algorithms

import "time"

// record applies hits to state at now under lim whatever the limit says (a
// Usage op, and Shadow and Quota ops of an admitted batch; TakeAll):
// hits that fit are taken exactly as Take takes them; hits that do not are
// still recorded, taking the key past its limit (a window's count exceeds
// Requests; a bucket goes into a debt bounded as its algorithm says), and
// the decision is then a denial: what a check would answer on the state
// written (Remaining 0, RetryAfter until a check would pass again), with
// RemainingBefore what was left before the hits.
// hits == 0 records nothing: record is Take; so does a limit of zero
// Requests of an algorithm that does not count at zero (Info.CountsAtZero:
// it keeps no state at a zero rate; fixed_window, which does, keeps its
// count at any limit, as envoyproxy does). It also says whether it changed
// the state (so that a store writes it) and what it applied
// (Batch.Applied).
func record(lim Limit, st State, hits uint64, now time.Time) (Decision, State, bool, uint64) {
	d, next := Take(lim, st, hits, now)
	return recordPast(lim, hits, now, d, next)
}

// recordPast is record after Take decided d and returned next.
func recordPast(lim Limit, hits uint64, now time.Time, d Decision, next State) (Decision, State, bool, uint64) {
	if d.Allowed || hits == 0 || !lim.recordsAtZero() || lim.Validate() != nil {
		if d.Allowed && hits > 0 {
			return d, next, true, hits
		}
		return d, next, false, 0
	}
	// Take returned the state as it read it (expired or out-of-range
	// states as fresh ones), which force starts from.
	alg, _ := lim.Algorithm.lookup()
	us := min(max(now.UnixMicro(), 0), maxUnixMicro)
	forced, applied := alg.force(lim, next, min(hits, MaxCount), us)
	forced = forced.as(alg.family)
	before := d.Remaining
	d, _ = alg.take(lim, forced, 0, us)
	d.Allowed, d.RemainingBefore = false, before
	return d, forced, true, applied
}
