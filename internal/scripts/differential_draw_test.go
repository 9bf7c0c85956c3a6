package scripts_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

var periods = []time.Duration{
	time.Microsecond, 7 * time.Microsecond, time.Millisecond, 1234567 * time.Microsecond,
	time.Second, time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour,
}

var requestChoices = []uint64{1, 1, 2, 3, 5, 10, 10, 100, 1000, 1e9}

// randomLimit draws a valid limit of alg (retrying until Validate passes).
func randomLimit(rng *rand.Rand, alg algorithms.Algorithm) algorithms.Limit {
	for {
		lim := algorithms.Limit{
			Algorithm: alg,
			Requests:  requestChoices[rng.IntN(len(requestChoices))],
			Period:    periods[rng.IntN(len(periods))],
		}
		if rng.IntN(50) == 0 {
			lim.Requests = 0
		}
		if alg.Info().Bucket && rng.IntN(2) == 0 {
			lim.Burst = 1 + rng.Uint64N(3*max(lim.Requests, 1))
		}
		if alg.Info().Stepped {
			if rng.IntN(2) == 0 {
				lim.RefillInterval = time.Duration(1+rng.Int64N(lim.Period.Microseconds())) * time.Microsecond
			}
			if rng.IntN(2) == 0 {
				lim.MaxDebt = rng.Uint64N(2*lim.Capacity() + 2)
			}
		}
		if alg.Info().Calendar && rng.IntN(4) == 0 {
			// Calendar months (USE_CALENDAR_MONTH_RATE_LIMIT), 1 to 3 or 12.
			lim.Calendar = true
			lim.Period = algorithms.Month * time.Duration([]int{1, 1, 2, 3, 12}[rng.IntN(5)])
		}
		if lim.Validate() == nil {
			return lim
		}
	}
}

// mutate changes one parameter of lim, as a config reload would.
func mutate(rng *rand.Rand, lim algorithms.Limit) algorithms.Limit {
	for {
		next := lim
		switch rng.IntN(6) {
		case 0:
			next.Requests = requestChoices[rng.IntN(len(requestChoices))]
		case 1:
			if next.Algorithm.Info().Bucket {
				next.Burst = rng.Uint64N(3*max(next.Requests, 1) + 1)
			}
		case 2:
			next.Period = periods[rng.IntN(len(periods))]
		case 3:
			if next.Algorithm.Info().Stepped {
				next.MaxDebt = rng.Uint64N(2*next.Capacity() + 2)
			}
		case 4:
			if next.Algorithm.Info().Stepped {
				next.RefillInterval = time.Duration(rng.Int64N(next.Period.Microseconds()+1)) * time.Microsecond
			}
		case 5:
			return randomLimit(rng, lim.Algorithm)
		}
		if next.Validate() == nil {
			return next
		}
	}
}

func randomHits(rng *rand.Rand, lim algorithms.Limit) uint64 {
	capacity := max(lim.Capacity()+lim.MaxDebt, 1)
	switch r := rng.IntN(100); {
	case r < 10:
		return 0
	case r < 45:
		return 1
	case r < 75:
		return 1 + rng.Uint64N(min(capacity, 20))
	case r < 85:
		return capacity - 1 + rng.Uint64N(3)
	case r < 95:
		return rng.Uint64N(2*capacity + 2)
	default:
		return []uint64{math.MaxUint64, algorithms.MaxCount, algorithms.MaxCount + 1, 1 << 42, 1 << 53}[rng.IntN(5)]
	}
}

func randomStep(rng *rand.Rand, p time.Duration, now int64) int64 {
	us := p.Microseconds()
	if now > 4_000_000_000_000_000 {
		us = 1000
	}
	switch r := rng.IntN(100); {
	case r < 3:
		// The clock went back (a Redis failover to a replica behind it).
		return -rng.Int64N(2*us + 1)
	case r < 20:
		return 0
	case r < 40:
		return rng.Int64N(us/10 + 1)
	case r < 80:
		return rng.Int64N(us + 1)
	default:
		return rng.Int64N(3*us + 1)
	}
}

// sequence is one independent history on its own keys and clock.
type sequence struct {
	keys [4]string
	now  int64
	lim  algorithms.Limit
	// counterPeriod is the period of every op of the Counter family on the
	// sequence's keys: a counter's key names its period (internal/config's
	// KeyBuilder), and its value only a tag of its window (lua/counter.lua),
	// which tells the windows of one period apart, not of two.
	counterPeriod time.Duration
	// counterMonths, when above 0, makes the sequence's counters count in
	// calendar months (USE_CALENDAR_MONTH_RATE_LIMIT; a key names that too).
	counterMonths int64
	history       []string
}

// pin gives lim the sequence's counter period if it is a Counter's (and
// valid: an invalid period stays invalid).
func (s *sequence) pin(lim algorithms.Limit) algorithms.Limit {
	if lim.Algorithm.Info().Counter && lim.Period != 0 {
		lim.Period, lim.Calendar = s.counterPeriod, s.counterMonths > 0
		if lim.Calendar {
			lim.Period = time.Duration(s.counterMonths) * algorithms.Month
		}
	}
	return lim
}

func (s *sequence) note(format string, args ...any) {
	s.history = append(s.history, fmt.Sprintf(format, args...))
	if len(s.history) > 12 {
		s.history = s.history[1:]
	}
}

// nextOps draws the ops of one step: mostly one op on the main key; some
// batches of 2-4 ops, half of them over the first two keys (so keys repeat:
// the script's general path), half on distinct keys (its distinct-keys
// path), with limit variants and, rarely, another algorithm; every mode
// (0 = Enforce .. NegativeHits, a refund) is drawn alike.
func (s *sequence) nextOps(rng *rand.Rand) []algorithms.Op {
	if rng.IntN(10) == 0 {
		s.lim = s.pin(mutate(rng, s.lim))
	}
	if rng.IntN(8) != 0 {
		// One in four is a usage report, recorded past the limit; one in
		// six a lease top-up on its own (Spare: taken only if it fits);
		// one in six a refund.
		op := algorithms.Op{Key: s.keys[0], Limit: s.lim, Hits: randomHits(rng, s.lim), Usage: rng.IntN(4) == 0}
		switch rng.IntN(6) {
		case 0:
			op.Mode = algorithms.Spare
		case 1:
			op.Mode = algorithms.NegativeHits
		}
		return []algorithms.Op{op}
	}
	ops := make([]algorithms.Op, 2+rng.IntN(3))
	distinct := rng.Perm(len(s.keys))
	if rng.IntN(2) == 0 {
		distinct = nil
	}
	for i := range ops {
		lim := s.lim
		switch rng.IntN(10) {
		case 0:
			lim = randomLimit(rng, algorithms.All()[rng.IntN(len(algorithms.All()))])
		case 1, 2:
			lim = mutate(rng, lim)
		case 3:
			lim.Period = 0 // invalid: denied with RetryAfter never
		}
		key := s.keys[rng.IntN(2)]
		if distinct != nil {
			key = s.keys[distinct[i]]
		}
		lim = s.pin(lim)
		ops[i] = algorithms.Op{Key: key, Limit: lim, Hits: randomHits(rng, lim), Mode: algorithms.Mode(rng.IntN(6)), Usage: rng.IntN(4) == 0, Joined: rng.IntN(2) == 0}
	}
	return ops
}
