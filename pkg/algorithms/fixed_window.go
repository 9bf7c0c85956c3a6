package algorithms

import "time"

// fixedWindow counts hits in windows of lim.Period aligned to the Unix epoch,
// like envoyproxy/ratelimit, so limit_remaining and duration_until_reset
// match it.
//
// State: A = window start (µs), B = hits admitted in that window.
// TTL: the state expires at the end of its window.
// Remaining: Requests minus hits admitted in this window.
// ResetAfter: until the window ends.
func fixedWindow(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	period := lim.Period.Microseconds()
	start := now - now%period
	count := int64(0)
	if st.A == start {
		count = st.B
	}
	limit := int64(lim.Requests)
	reset := time.Duration(start+period-now) * time.Microsecond
	d := Decision{ResetAfter: reset}
	if int64(hits) > limit-count {
		d.Remaining = uint64(max(limit-count, 0))
		d.RetryAfter = reset
		if int64(hits) > limit {
			d.RetryAfter = Never
		}
		return d, st
	}
	count += int64(hits)
	d.Allowed = true
	d.Remaining = uint64(limit - count)
	return d, State{A: start, B: count, ExpiresAt: start + period}
}
