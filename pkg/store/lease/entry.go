package lease

import (
	"container/list"
	"math"
	"math/bits"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// entry is what a replica knows of one counter: its observed rate, the
// backend's latest answer for it, and its lease. Times are local Unix µs.
type entry struct {
	key   string
	el    *list.Element // in its shard's LRU
	limit algorithms.Limit
	// gen tells this entry from an earlier one of the same key: a block
	// taken for one is installed only into that one (learn, refill), never
	// into the entry that replaced it after Forget or a changed rule.
	gen uint64

	// Hits seen in the rate interval starting at rateStart (cur) and in the
	// one before (prev): the rate is estimated over the last interval like a
	// sliding window counter, so it rises as soon as traffic does, and a
	// local answer only adds to cur (the weighting is done when a block is
	// sized, on the way to the backend).
	rateStart int64
	cur, prev uint64
	// seen and seenBefore are the times of the last two observed hits
	// (0: none), which say whether a counter too cold for the rate
	// estimate still comes back within LEASE_IDLE (Store.blockSize).
	seen, seenBefore int64
	// paid says the counter's last lease served a hit locally before it
	// ended: a block taken at its next hit is likely to pay off too.
	paid      bool
	remaining uint64 // the backend's latest Remaining for the key
	known     bool   // remaining is from an answer (a key first seen has none)
	resetAt   int64  // when the backend's latest ResetAfter runs out
	inflight  bool   // a block is being taken: no second top-up meanwhile
	slot      int    // index + 1 in its shard's leased set; 0: not in it
	used      bool   // in its shard's used list: a request used its lease since the last sweep
	lruAt     int64  // when it last moved to the front of its shard's LRU
	lease     lease
}

// observe counts hits seen at now.
func (e *entry) observe(now, interval int64, hits uint64) {
	e.roll(now, interval)
	e.cur = satmath.Add(e.cur, hits)
	e.seenBefore, e.seen = e.seen, now
}

// learn records the backend's decision d for the key, asked at now.
func (e *entry) learn(d algorithms.Decision, now int64) {
	e.remaining, e.known = d.Remaining, true
	e.resetAt = satAddI(now, d.ResetAfter.Microseconds())
}

// roll moves the rate interval up to now.
func (e *entry) roll(now, interval int64) {
	el := now - e.rateStart
	switch {
	case el < 0:
		// The clock went back: count from here (the counts stay, as the
		// hits they saw were recent).
		e.rateStart = now
	case el >= interval:
		if el < 2*interval {
			e.prev = e.cur
		} else {
			e.prev = 0
		}
		e.cur = 0
		e.rateStart = now - el%interval
	}
}

// estimate is the hits seen over the last interval (rate*target): the
// current interval's plus the previous one's weighted by how much of it
// the last interval still covers, rounded up.
func (e *entry) estimate(now, interval int64) uint64 {
	e.roll(now, interval)
	left := interval - (now - e.rateStart)
	return satmath.Add(e.cur, uint64(math.Ceil(float64(e.prev)*float64(left)/float64(interval))))
}

// leaseKind is what a lease reserves (algorithms.Info's WindowLease and
// BucketLease).
type leaseKind uint8

const (
	none   leaseKind = iota
	window           // hits of one window
	bucket           // emission slots of a continuous bucket
)

// kindOf is what a lease of a's counters reserves.
func kindOf(a algorithms.Algorithm) leaseKind {
	switch info := a.Info(); {
	case info.WindowLease:
		return window
	case info.BucketLease:
		return bucket
	}
	return none
}

// lease is the blocks a replica holds of one counter.
//
// A window lease is the hits of the blocks taken in one window; it ends at
// deadline, the window's end measured from the local clock before the
// round trip (early, never late).
//
// A bucket lease is one block of size slots. Its charge at backend time t
// >= t_send left the bucket's arrival time at TAT <= t + ResetAfter, and
// TAT > t + ResetAfter - 1µs (ResetAfter rounds up to whole µs); slot k
// (0 <= k < size) is [S_k, S_k + T) with S_k = TAT - (size-k)*T, T =
// Period/Requests. Slot k may be used at u only when u <= S_k, which holds
// whenever u <= end - ceil((size-k)*T) - 1µs with end = t_send +
// ResetAfter (deadline holds end). Every hit admitted anywhere then owns a
// disjoint slot starting in [u, u + (capacity-1)*T], so the hits admitted
// in any [a, b] number at most capacity + (b-a)/T: the bucket's own bound.
// Slots are used earliest first; a slot whose deadline passed lapses.
type lease struct {
	kind  leaseKind
	limit algorithms.Limit
	size  uint64 // hits charged (window: all blocks; bucket: the block's slots)
	// used is hits used (window), or the next slot to use (bucket: slots
	// before it were used or lapsed).
	used uint64
	// deadline: window, the first µs the lease may not be used at; bucket,
	// end (t_send + ResetAfter), which every slot's deadline counts back
	// from.
	deadline      int64
	born, lastUse int64
	after         algorithms.State // window: the charged state Return needs
}

// room is how many hits the lease can admit at now.
func (l *lease) room(now int64) uint64 {
	switch l.kind {
	case window:
		if now >= l.deadline {
			return 0
		}
		return l.size - l.used
	case bucket:
		return l.size - max(l.used, l.firstLive(now))
	}
	return 0
}

// firstLive is the first slot whose deadline is at or after now (size when
// none is): slot k is live iff ceil((size-k)*P/R) <= end-1-now, that is
// size-k <= floor((end-1-now)*R/P), computed in 128 bits.
func (l *lease) firstLive(now int64) uint64 {
	d := l.deadline - 1 - now
	if d < 0 {
		return l.size
	}
	n := mulDivSat(uint64(d), l.limit.Requests, uint64(l.limit.Period.Microseconds()))
	if n >= l.size {
		return 0
	}
	return l.size - n
}

// use takes hits (which fit: room(now) >= hits) and returns how many slots
// lapsed on the way.
func (l *lease) use(now int64, hits uint64) (lapsed uint64) {
	if l.kind == bucket {
		if f := l.firstLive(now); f > l.used {
			lapsed, l.used = f-l.used, f
		}
	}
	l.used += hits
	return lapsed
}

// unused is what the lease holds that no hit used.
func (l *lease) unused() uint64 { return l.size - l.used }

// mulDivSat is floor(a*b/d), saturating at MaxUint64.
func mulDivSat(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

func satAddI(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
