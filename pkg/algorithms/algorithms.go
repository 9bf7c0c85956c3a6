// Package algorithms is the pure Go reference of every rate-limit algorithm
// ratelimitd offers. Each algorithm is a function of (limit, state, hits, now)
// that returns a decision and the next state: no I/O, no clock, no globals.
// The Lua scripts in internal/scripts implement the same functions and are tested
// against these references, so the two must change together.
//
// All state is integers: time in Unix microseconds, counts in whole hits.
package algorithms

import "time"

// Limit is a rate of Requests per Period, as configured for one rule.
type Limit struct {
	Algorithm Algorithm
	// Calendar makes the windows of fixed_window and sliding_window UTC
	// calendar months (USE_CALENDAR_MONTH_RATE_LIMIT): Period is then n
	// Month, and each window spans n calendar months, however long they
	// are. On any other algorithm it fails Validate. (Beside Algorithm, it fits in that byte's word:
	// Limit stays six words, and every op and request that holds one.)
	Calendar bool
	// Requests admitted per Period (requests_per_unit). Zero admits nothing.
	Requests uint64
	// Period is unit x unit_multiplier; a whole number of seconds in config.
	Period time.Duration
	// Burst is the bucket capacity for token_bucket, leaky_bucket and gcra
	// (Info.Bucket). Zero means Requests; on another algorithm it
	// fails Validate.
	Burst uint64
	// RefillInterval makes token_bucket add tokens in steps of
	// Requests*RefillInterval/Period every RefillInterval (fractions of a
	// token carry over to the next step). Zero is continuous.
	RefillInterval time.Duration
	// MaxDebt lets token_bucket lend up to this many tokens it does not have.
	MaxDebt uint64
}

// Capacity is Burst, or Requests when Burst is unset.
func (l Limit) Capacity() uint64 {
	if l.Burst == 0 {
		return l.Requests
	}
	return l.Burst
}

// Decision is the outcome of one Take.
type Decision struct {
	Allowed bool
	// Remaining is how many more hits would be admitted right now, after this
	// one if it was admitted (the meaning per algorithm is in its doc comment).
	Remaining uint64
	// ResetAfter is duration_until_reset: for windows, until the window
	// rolls over; for buckets, until the bucket is full (empty meter) again;
	// when denied, never less than RetryAfter.
	ResetAfter time.Duration
	// RetryAfter is how long until the same hits would be admitted (exactly:
	// not a µs earlier); zero when allowed. It is Never when hits can never
	// fit.
	RetryAfter time.Duration
	// RemainingBefore is set on a denial whose hits were recorded past the
	// limit anyway (record: usage, and shadow and quota ops of an admitted
	// batch), whose Remaining is then 0: what was left before its hits, so
	// that the hits that fit can be told from those past the limit (as
	// envoyproxy's near_limit and over_limit stats do). Zero otherwise.
	RemainingBefore uint64
}
