package storetest

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// exactMode is how the exact case draws one op of a mode.
type exactMode uint8

const (
	enforceOp exactMode = iota
	shadowOp
	quotaOp
	usageOp
	refundOp
	spareOp
)

// limit draws a limit of the run's algorithm: small, so that histories
// fill it; a burst, a refill interval, a debt or calendar months where the
// algorithm has them.
func (x *exactRun) limit() algorithms.Limit {
	rng := x.rng
	for {
		lim := algorithms.Limit{
			Algorithm: x.a,
			Requests:  []uint64{1, 2, 3, 5, 10}[rng.IntN(5)],
			Period:    []time.Duration{time.Second, 10 * time.Second, time.Minute}[rng.IntN(3)],
		}
		if x.a.Info().Bucket && rng.IntN(2) == 0 {
			lim.Burst = 1 + rng.Uint64N(2*lim.Requests)
		}
		if x.a.Info().Stepped && rng.IntN(3) == 0 {
			lim.RefillInterval = lim.Period / time.Duration(1+rng.IntN(4))
		}
		if x.a.Info().Stepped && rng.IntN(3) == 0 {
			lim.MaxDebt = 1 + rng.Uint64N(3)
		}
		if x.a.Info().Calendar && rng.IntN(4) == 0 {
			lim.Calendar, lim.Period = true, algorithms.Month
		}
		if lim.Validate() == nil {
			return lim
		}
	}
}

// hits draws a number of hits under lim: mostly within its capacity,
// sometimes past it (usage, shadow and quota ops are recorded past it).
func (x *exactRun) hits(lim algorithms.Limit) uint64 {
	c := lim.Capacity() + lim.MaxDebt
	switch x.rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return c + 1 + x.rng.Uint64N(2*c+1)
	default:
		return 1 + x.rng.Uint64N(c)
	}
}

// history gives key a past: admissions and usage reports over a period or
// so (at most a minute: a trial spans under 1000 of the shortest windows,
// so that no counter a real TTL would have dropped is read again, its
// value's window tag matching; see lua/counter.lua), through the store
// and the reference alike.
func (x *exactRun) history(key string, lim algorithms.Limit) {
	for range x.rng.IntN(5) {
		x.h.clock.Advance(time.Duration(x.rng.Int64N(int64(min(lim.Period, time.Minute)) / 3)))
		r := req(key, lim, x.hits(lim))
		r.Usage = x.rng.IntN(3) == 0
		x.keepAhead()
		x.h.take(r)
	}
}

// request draws 1 to 5 ops of the given modes over keys (a key may come
// twice, under its one limit), then one enforced op that the reference
// denies whatever the state (more hits than its capacity), but for a
// request of quota ops only, which its quota alternatives must deny.
func (x *exactRun) request(keys []string, limits map[string]algorithms.Limit, modes []exactMode) []store.Request {
	rng := x.rng
	n := 1 + rng.IntN(5)
	reqs := make([]store.Request, 0, n+1)
	quotaOnly := len(modes) == 1 && modes[0] == quotaOp
	for range n {
		k := keys[rng.IntN(len(keys))]
		lim := limits[k]
		r := req(k, lim, x.hits(lim))
		switch modes[rng.IntN(len(modes))] {
		case enforceOp:
			r.Mode = algorithms.Enforce
		case shadowOp:
			r.Mode = algorithms.Shadow
		case quotaOp:
			r.Mode, r.Joined = algorithms.Quota, rng.IntN(3) == 0
			if quotaOnly && rng.IntN(2) == 0 {
				r.Hits = lim.Capacity() + lim.MaxDebt + 1
			}
		case usageOp:
			r.Usage = true
		case refundOp:
			r.Mode = algorithms.NegativeHits
		case spareOp:
			r.Mode = algorithms.Spare
		}
		reqs = append(reqs, r)
	}
	if quotaOnly {
		return reqs
	}
	k := keys[rng.IntN(len(keys))]
	lim := limits[k]
	deny := req(k, lim, lim.Capacity()+lim.MaxDebt+1)
	at := rng.IntN(len(reqs) + 1)
	return append(reqs[:at], append([]store.Request{deny}, reqs[at:]...)...)
}
