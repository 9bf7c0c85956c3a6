package algorithms

import "time"

// A state read back from a store is only trusted within the algorithm's
// range: a hash edited by hand, another tool on the same Redis or a bad
// deploy must not deny forever, fail every call, or push a TTL years ahead.
// Take reads a live state that fails its algorithm's check as absent, so
// the next charge overwrites it; internal/scripts does the same in Lua.
//
// Every time a state carries is bounded by now plus the rule's horizon
// (horizon), so every TTL a take writes is at most twice the horizon.

// maxExact bounds every stored integer: Lua's numbers are exact below it.
const maxExact = 1 << 53

// horizon is how long the state of one take can matter under this limit:
// a window (fixed_window, sliding_log), two windows (sliding_window), the
// time to refill an empty bucket (token_bucket: from full debt, plus a
// refill step; leaky_bucket; gcra). Zero for an invalid limit. With zero
// Requests only fixed_window writes a state, for one window (Period, or
// the longest calendar months).
func (l Limit) horizon() time.Duration {
	alg, ok := l.Algorithm.lookup()
	switch {
	case !ok || l.Validate() != nil:
		return 0
	case l.Requests == 0:
		return micros(longestWindow(l))
	}
	return micros(alg.horizon(l))
}

// inRange reports whether a live state st can be trusted under lim at now:
// every integer exact in binary64, then the algorithm's own check.
func inRange(alg *spec, lim Limit, st State, now int64) bool {
	// A store reads an integer Lua cannot hold exactly as no state at all,
	// whatever the limit (internal/scripts' regs_get).
	for _, x := range [...]int64{st.regs[0], st.regs[1], st.regs[2], st.ExpiresAt} {
		if x < -maxExact || x > maxExact {
			return false
		}
	}
	if lim.Requests == 0 {
		return true // zeroRate neither reads nor writes it; fixed_window's count only denies more
	}
	return alg.valid(lim, st, now, alg.horizon(lim))
}

func between(x, lo, hi int64) bool { return lo <= x && x <= hi }

// The newest entry bounds the ExpiresAt a take writes; one period ahead is a
// clock that went back a window.

// maxPeriodMicros bounds a stored fraction of a unit (1/Period units).
const maxPeriodMicros = int64(MaxPeriod / time.Microsecond)
