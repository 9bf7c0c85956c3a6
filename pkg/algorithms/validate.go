package algorithms

import (
	"errors"
	"fmt"
	"time"
)

// Bounds keep every intermediate value of every algorithm exact in Lua's
// binary64 numbers (integers up to 2^53): timestamps in microseconds are
// about 2^51 today, and no count exceeds MaxCount.
const (
	MaxPeriod = 100 * 365 * 24 * time.Hour
	MaxCount  = 1 << 40
)

// Validate reports a Limit the algorithms cannot evaluate exactly.
func (l Limit) Validate() error {
	var errs []error
	if _, ok := algorithmNames[l.Algorithm]; !ok {
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
	if (l.RefillInterval != 0 || l.MaxDebt != 0) && l.Algorithm != TokenBucket {
		errs = append(errs, errors.New("refill_interval and max_debt apply to token_bucket only"))
	}
	return errors.Join(errs...)
}
