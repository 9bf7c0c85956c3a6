package lease

import (
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// The policy: when a block is taken and how large, when a lease ends, and
// what its end gives back. Everything else in the package is mechanism.
//
// Sizing. A block is b = min(ceil(rate*LEASE_TARGET), LEASE_MAX_BLOCK,
// floor(left*LEASE_FRACTION)) hits (blockSize), taken only when b >= 2 and
// b exceeds the batch's own hits on the key. A window counter too cold for
// the rate to give 2 but that comes back (returning) gets 2. A window lease
// down to half a block is refilled ahead by the sweeper (refillWanted), so
// it holds at most one and a half blocks.
//
// Ending. A lease ends at its window's end or its last slot's deadline,
// after LEASE_IDLE unused, at LEASE_MAX_AGE unless renewed in place (renew),
// when its key's rule changes, and on ReturnAll, SetRules, Forget, Stop and
// Close. An ended window lease gives its unused hits back while its window
// lasts (givesBack); bucket slots and ended windows lapse.

// blockSize is min(ceil(rate*target), max block, floor(left*fraction)),
// where left is what the counter is expected to have left after the
// batch's own hits on it.
func (s *Store) blockSize(e *entry, now int64, hits uint64) uint64 {
	b := min(e.estimate(now, s.interval), s.maxBlock)
	if b < 2 && s.returning(e) {
		b = min(2, s.maxBlock)
	}
	left := e.remaining - min(hits, e.remaining)
	return min(b, uint64(float64(left)*s.fraction))
}

// returning reports whether e is a window counter too cold for two hits
// per LEASE_TARGET that a block of 2, taken now, would most likely serve:
// its last two hits came within LEASE_IDLE of each other, or its last
// lease served a hit before it ended (a counter that comes back every 10 s
// or so now and then leaves a gap past LEASE_IDLE; its next lease pays off
// as its last did, where a counter seen once a minute does not lease
// again). The sweeper then refills the block in its batch, where without
// it each of the counter's hits is a round trip of its own. Bucket blocks
// are left out: their slots lapse long before such a counter's next hit.
func (s *Store) returning(e *entry) bool {
	if !e.limit.Algorithm.Info().WindowLease {
		return false
	}
	return s.idle > 0 && e.seenBefore != 0 && (e.seen-e.seenBefore <= s.idle || e.paid)
}

// newLease is a block of b hits of lim that the backend, asked at now,
// answered with d (the Spare op's decision: the key's last op in its batch,
// so d.ResetAfter counts every hit the batch charged it). A window block
// ends with the window it was charged in: ResetAfter runs to the window's
// end, or ResetLag periods past it. A bucket block's deadline is its last
// slot's end, which each slot's counts back from (lease in entry.go).
func newLease(lim algorithms.Limit, b uint64, d algorithms.Decision, now int64) lease {
	l := lease{kind: kindOf(lim.Algorithm), limit: lim, size: b, born: now, lastUse: now}
	l.deadline = satAddI(now, d.ResetAfter.Microseconds())
	if l.kind == window {
		l.deadline -= lim.Algorithm.Info().ResetLag * lim.Period.Microseconds()
	}
	return l
}

// over reports whether a lease has ended at now: its window or last slot,
// idleness or age.
func (s *Store) over(l *lease, now int64) bool {
	return s.spent(l, now) || (s.maxAge > 0 && now-l.born >= s.maxAge)
}

// spent reports whether a lease has ended at now for any reason but its
// age: its window or last slot, or idleness.
func (s *Store) spent(l *lease, now int64) bool {
	return l.room(now) == 0 || (s.idle > 0 && now-l.lastUse >= s.idle)
}

// givesBack reports whether ending l at now gives its unused hits back: a
// window lease's while its window lasts. Bucket slots are never given back,
// and a window that ended took its hits with it.
func givesBack(l *lease, now int64) bool {
	return l.kind == window && l.room(now) > 0
}

// agingOut reports whether LEASE_MAX_AGE ends l before the full sweep
// after next (gap is the time since the last one): renew keeps it then,
// since the request that found it aged out would take its counter to the
// backend.
func (s *Store) agingOut(l *lease, now, gap int64) bool {
	return s.maxAge > 0 && now-l.born >= s.maxAge-2*gap
}

// refillWanted is the block to take ahead for e at now, or 0. The caller
// holds e's shard.
func (s *Store) refillWanted(e *entry, now int64) uint64 {
	l := &e.lease
	if !s.refillAhead || !s.resizable(e) {
		return 0
	}
	// A block that would live less than two sweeps is not worth a call:
	// the next window's first request tops up as before.
	if l.deadline-now <= 2*s.every.Microseconds() {
		return 0
	}
	// At most half a block left, so a small block (2 or 3 hits, a counter
	// seen a few times per target) is refilled with one hit left rather
	// than when it is empty, which a request would find first.
	b := s.blockSize(e, now, 0)
	if b < 2 || 2*l.room(now) > b {
		return 0
	}
	return b
}

// renew keeps e's window lease past LEASE_MAX_AGE, in place, when a block
// of its counter would be taken now (its rate, or a return within
// LEASE_IDLE, and what the counter has left): the lease starts a new age
// holding at most what a lease refilled ahead holds, one and a half such
// blocks, and the charge of any rest beyond that is returned (ch.Applied > 0:
// the rate fell, or the counter neared its limit). Renewing costs the
// backend nothing where ending and taking a new block cost a return and a
// take; the hits kept were charged when they were taken, so nothing is
// admitted that Redis did not charge. A lease no block would be taken for
// is not renewed (ok false): LEASE_MAX_AGE ends it. The caller holds e's
// shard.
func (s *Store) renew(sh uint8, e *entry, now int64) (ch store.Charge, ok bool) {
	if !s.resizable(e) {
		return store.Charge{}, false
	}
	b := s.blockSize(e, now, 0)
	if b < 2 {
		return store.Charge{}, false
	}
	l := &e.lease
	l.born = now
	keep := b + b/2
	if l.unused() <= keep {
		return store.Charge{}, true
	}
	trim := l.unused() - keep
	l.size -= trim
	return s.giveBackCharge(sh, e.key, l, trim), true
}

// resizable reports whether the sweeper may size a block for e's lease: a
// window lease of e's current rule, e's Remaining known and no block of
// it in flight.
func (s *Store) resizable(e *entry) bool {
	l := &e.lease
	return l.kind == window && !e.inflight && e.known && l.limit == e.limit
}
