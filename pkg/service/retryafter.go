package service

import (
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// retryAfter is how long a denied request must wait before the same
// request would be admitted: every enforced descriptor over its limit must
// have room (the longest of their waits), and when every quota descriptor
// is over, one of them must (the shortest of theirs). The constraining
// descriptor alone can understate it: with a per-minute and a per-hour rule
// both spent, the minute rule resets first and the request still waits for
// the hour.
func retryAfter(p *plan, results []store.Result, resp *rlsv3.RateLimitResponse) time.Duration {
	verdict := store.Verdict(p.reqs, results)
	var mustWait, eitherWait time.Duration
	either := false
	for i, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		hold := verdict.Hold(p.reqs[sl.req].Mode, results[sl.req].Allowed)
		if hold == algorithms.Free {
			continue
		}
		wait := results[sl.req].RetryAfter
		if wait == algorithms.Never || wait <= 0 {
			// The hits can never fit: the window's end is the best hint.
			wait = resp.Statuses[i].GetDurationUntilReset().AsDuration()
		}
		if hold == algorithms.Must {
			mustWait = max(mustWait, wait)
		} else if !either || wait < eitherWait {
			eitherWait, either = wait, true
		}
	}
	return max(mustWait, eitherWait)
}
