package ratelimit

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// retryAfter is how long a denied request must wait before the same
// request would be admitted: every enforced descriptor over its limit must
// have room (the longest of their waits), and when every quota alternative
// is over, one of them must (the shortest of theirs; an alternative is a
// descriptor, or a quota group of them (WithQuotaGroups), which waits for
// all its members). The constraining descriptor alone can understate it:
// with a per-minute and a per-hour rule both spent, the minute rule resets
// first and the request still waits for the hour; so can a descriptor's
// deciding limit, when several of its limits are spent.
func retryAfter(p *plan, results []store.Result) time.Duration {
	everyQuotaDenied := quotaDenied(p.reqs, results)
	var mustWait time.Duration
	// alternatives holds each quota alternative's wait, by its first op.
	var alternatives []altWait
	for _, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		h := holdOf(everyQuotaDenied, p.reqs[sl.req].Mode, results[sl.decider].Allowed)
		if h == free {
			continue
		}
		wait := slotWait(p, sl, results)
		if h == must {
			mustWait = max(mustWait, wait)
			continue
		}
		alternatives = addAltWait(alternatives, alternativeStart(p, sl.req), wait)
	}
	if len(alternatives) == 0 {
		return mustWait
	}
	eitherWait := alternatives[0].wait
	for _, a := range alternatives[1:] {
		eitherWait = min(eitherWait, a.wait)
	}
	return max(mustWait, eitherWait)
}

// hold is how an op holds a denied request back: not at all, as one that
// must get room, or as one of the quota alternatives one of which must.
type hold uint8

const (
	free hold = iota
	must
	either
)

// holdOf is how an op of mode m, allowed or not, holds back a request: a
// denied Enforce op must get room; when every Quota alternative is denied
// (quotaDenied), any one of them getting room would do.
func holdOf(quotaDenied bool, m algorithms.Mode, allowed bool) hold {
	switch {
	case allowed || m == algorithms.Shadow || m == algorithms.Spare || m == algorithms.NegativeHits:
		return free
	case m == algorithms.Quota:
		if quotaDenied {
			return either
		}
		return free
	default:
		return must
	}
}

// quotaDenied reports whether reqs, decided as results, had Quota
// alternatives and every one was denied: the verdict of the Quota ops
// alone, every other op added as allowed.
func quotaDenied(reqs []store.Request, results []store.Result) bool {
	var v algorithms.Verdict
	for i, r := range reqs {
		v.Add(r.Mode, r.Joined, results[i].Allowed || r.Mode != algorithms.Quota)
	}
	return v.Denied()
}

type altWait struct {
	start int
	wait  time.Duration
}

// addAltWait folds wait into the alternative starting at op start.
func addAltWait(as []altWait, start int, wait time.Duration) []altWait {
	for i := range as {
		if as[i].start == start {
			as[i].wait = max(as[i].wait, wait)
			return as
		}
	}
	return append(as, altWait{start, wait})
}

// alternativeStart is the first op of the quota alternative op i is in:
// Joined ops continue the one before them.
func alternativeStart(p *plan, i int) int {
	for i > 0 && p.reqs[i].Joined {
		i--
	}
	return i
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
