package algorithms

import (
	"math"
	"time"
)

// Never is the RetryAfter of hits that can never be admitted (more hits than
// the capacity, or a limit of zero requests).
const Never = time.Duration(math.MaxInt64)

// Take applies hits to state at now under lim. hits == 0 only checks.
// The returned state is the one to persist when the caller commits.
//
// A limit that fails Validate denies everything with RetryAfter Never. A
// state written by another family (say sliding_log's log,
// the registers of sliding_window or fixed_window's counter) reads as a
// fresh one, so changing a rule's algorithm never misreads old state; so
// does a state out of its algorithm's range (see valid.go). now is clamped
// to the Unix epoch .. the year 2155 (every stored time stays exact in Lua).
func Take(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	alg, st, us, ok := read(lim, st, now)
	if !ok {
		return Decision{RetryAfter: Never}, st
	}
	d, next := alg.take(lim, st, hits, us)
	return d, next.as(alg.family)
}

// read is how Take (and refund) read st under lim at now: the clock clamped
// to 0..maxUnixMicro in µs, and the state as the algorithm sees it (an
// expired one, one of the other family or one out of range as fresh).
// ok is false for a limit that fails Validate (st then only expired).
func read(lim Limit, st State, now time.Time) (*spec, State, int64, bool) {
	us := min(max(now.UnixMicro(), 0), maxUnixMicro)
	if st.ExpiresAt != 0 && us >= st.ExpiresAt {
		st = State{}
	}
	if lim.Validate() != nil {
		return &noSpec, st, us, false
	}
	alg, _ := lim.Algorithm.lookup() // Validate rejected unknown algorithms
	if !st.readableAs(alg.family) || (st.ExpiresAt != 0 && !inRange(alg, lim, st, us)) {
		st = State{}
	}
	return alg, st, us, true
}

// zeroRate is the decision of every algorithm that does not count at zero
// (CountsAtZero) when Requests is 0: hits are never admitted, a check is.
func zeroRate(st State, hits uint64) (Decision, State) {
	if hits > 0 {
		return Decision{RetryAfter: Never}, st
	}
	return Decision{Allowed: true}, st
}
