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
	var hardWait, quotaWait time.Duration
	quotaOver, quotaRules := 0, 0
	for i, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		soft := p.soft[sl.req]
		if soft == quota {
			quotaRules++
		}
		st := resp.Statuses[i]
		if st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			continue
		}
		wait := results[sl.req].RetryAfter
		if wait == algorithms.Never || wait <= 0 {
			// The hits can never fit: the window's end is the best hint.
			wait = st.GetDurationUntilReset().AsDuration()
		}
		switch soft {
		case hard:
			hardWait = max(hardWait, wait)
		case quota:
			if quotaOver == 0 || wait < quotaWait {
				quotaWait = wait
			}
			quotaOver++
		}
	}
	if quotaRules > 0 && quotaOver == quotaRules {
		return max(hardWait, quotaWait)
	}
	return hardWait
}
