package ratelimit

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// retryAfter is how long a denied request must wait before the same
// request would be admitted: every enforced descriptor over its limit must
// have room (the longest of their waits), and when every quota descriptor
// is over, one of them must (the shortest of theirs). The constraining
// descriptor alone can understate it: with a per-minute and a per-hour rule
// both spent, the minute rule resets first and the request still waits for
// the hour; so can a descriptor's deciding limit, when several of its
// limits are spent.
func retryAfter(p *plan, results []store.Result) time.Duration {
	verdict := store.VerdictOf(p.reqs, results)
	var mustWait, eitherWait time.Duration
	either := false
	for _, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		hold := verdict.Hold(p.reqs[sl.req].Mode, results[sl.decider].Allowed)
		if hold == algorithms.Free {
			continue
		}
		wait := slotWait(p, sl, results)
		if hold == algorithms.Must {
			mustWait = max(mustWait, wait)
		} else if !either || wait < eitherWait {
			eitherWait, either = wait, true
		}
	}
	return max(mustWait, eitherWait)
}

// slotWait is how long counted descriptor sl must wait for room: the
// longest wait of its denied limits, each of which must have room.
func slotWait(p *plan, sl slot, results []store.Result) time.Duration {
	var longest time.Duration
	for j := sl.req; j < sl.req+sl.n; j++ {
		if results[j].Allowed {
			continue
		}
		wait := results[j].RetryAfter
		if wait == algorithms.Never || wait <= 0 {
			// The hits can never fit: the window's end is the best hint.
			wait = untilReset(p.rules[j].Limit.Algorithm, results[j].ResetAfter)
		}
		longest = max(longest, wait)
	}
	return longest
}
