package algorithms

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// Bounds keep every intermediate value of every algorithm exact in Lua's
// binary64 numbers (integers up to 2^53): timestamps in microseconds are
// about 2^51 today, no count exceeds MaxCount, and no state outlives its
// write by more than 2*MaxPeriod (a sliding window's previous window), so
// every stored time stays below 2^53 while now <= maxUnixMicro.
const (
	MaxPeriod = 50 * 365 * 24 * time.Hour
	MaxCount  = 1 << 40
	// maxUnixMicro is the latest supported clock (year 2155) in Unix µs.
	maxUnixMicro = 1<<53 - 1 - 2*int64(MaxPeriod/time.Microsecond)
)

// Validate reports a Limit the algorithms cannot evaluate exactly. It is
// pure and cheap: Take calls it on every evaluation.
func (l Limit) Validate() error {
	var errs []error
	if !l.Algorithm.valid() {
		errs = append(errs, fmt.Errorf("algorithm is unset or unknown (%d)", l.Algorithm))
	}
	if l.Period < time.Microsecond || l.Period > MaxPeriod {
		errs = append(errs, fmt.Errorf("period %s is outside 1µs..%s", l.Period, MaxPeriod))
	}
	if l.Period%time.Microsecond != 0 {
		errs = append(errs, fmt.Errorf("period %s is not a whole number of microseconds", l.Period))
	}
	if l.Requests > MaxCount || l.Burst > MaxCount || l.MaxDebt > MaxCount {
		errs = append(errs, fmt.Errorf("requests, burst and max_debt must be at most %d", uint64(MaxCount)))
	}
	if l.RefillInterval < 0 || l.RefillInterval > l.Period || l.RefillInterval%time.Microsecond != 0 {
		errs = append(errs, fmt.Errorf("refill_interval %s must be whole microseconds between 0 and the period %s", l.RefillInterval, l.Period))
	}
	// An option the algorithm ignores is refused rather than dropped: the
	// operator meant something by it.
	if l.Burst != 0 && l.Algorithm.valid() && !l.Algorithm.Info().Bucket {
		errs = append(errs, fmt.Errorf("burst applies to %s only, not %s", namesOf(func(a Algorithm) bool { return a.Info().Bucket }), l.Algorithm))
	}
	if (l.RefillInterval != 0 || l.MaxDebt != 0) && !l.Algorithm.Info().Stepped {
		errs = append(errs, fmt.Errorf("refill_interval and max_debt apply to %s only", namesOf(func(a Algorithm) bool { return a.Info().Stepped })))
	}
	if l.Calendar {
		errs = append(errs, l.validateCalendar()...)
	}
	if len(errs) == 0 && !l.refillsInTime() {
		errs = append(errs, fmt.Errorf("a bucket of %d (2*burst+max_debt, the deepest recorded usage) refilling at %d per %s takes longer than %s to refill", 2*l.Capacity()+l.MaxDebt, l.Requests, l.Period, MaxPeriod))
	}
	return errors.Join(errs...)
}

// refillsInTime reports whether a bucket (token_bucket, leaky_bucket, gcra)
// goes from the deepest debt recorded usage may leave (one bucket below
// -MaxDebt, see record) to full, plus one refill step, within MaxPeriod:
// every time a bucket stores or reports is bounded by that.
func (l Limit) refillsInTime() bool {
	if !l.Algorithm.Info().Bucket || l.Requests == 0 {
		return true
	}
	// (2*Capacity+MaxDebt) * Period <= (MaxPeriod - RefillInterval) * Requests
	hiNeed, loNeed := bits.Mul64(2*l.Capacity()+l.MaxDebt, uint64(l.Period.Microseconds()))
	budget := uint64((MaxPeriod - l.RefillInterval).Microseconds())
	hiHave, loHave := bits.Mul64(budget, l.Requests)
	return hiNeed < hiHave || (hiNeed == hiHave && loNeed <= loHave)
}

// validateCalendar checks a Limit with Calendar set: a window algorithm
// (Info.Calendar), and a Period of whole Months (n Month) no longer, at the
// longest months, than MaxPeriod.
func (l Limit) validateCalendar() []error {
	var errs []error
	if l.Algorithm.valid() && !l.Algorithm.Info().Calendar {
		errs = append(errs, fmt.Errorf("calendar months apply to %s only, not %s", namesOf(func(a Algorithm) bool { return a.Info().Calendar }), l.Algorithm))
	}
	if l.Period < Month || l.Period%Month != 0 || l.Period/Month*longestMonth > MaxPeriod {
		errs = append(errs, fmt.Errorf("a calendar period must be 1 to %d months of %s, not %s", MaxPeriod/longestMonth, Month, l.Period))
	}
	return errs
}
