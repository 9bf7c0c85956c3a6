package lease

import (
	"context"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Refilling ahead. A window lease in steady use runs out every block, and
// the request that finds it empty goes to the backend with a top-up: one
// round trip for one decision (on the bench's Zipf load, 0.1 blocks per
// decision). The sweeper instead tops up every window lease whose room has
// fallen to half a block or less, all of them in one backend call per
// sweep (store.Lender.TakeCharged of Spare ops, by slot on Cluster), so a
// warm counter's requests stay local and its blocks cost Redis one op in a
// large batch. A lease then holds at most one and a half blocks.
//
// Bucket leases are not refilled ahead: a new block replaces the old one,
// whose unused slots would lapse.

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
// blocks, and the charge of any rest beyond that is returned (ch.Hits > 0:
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

// refill takes the blocks of ops (Spare ops, one per key, marked inflight;
// shards[i] is ops[i]'s shard) in one backend call and installs those it
// got. now was read before the call, so their deadlines are early.
func (s *Store) refill(ctx context.Context, ops []store.Request, shards []uint8, now int64) error {
	res, charges, err := s.next.TakeCharged(ctx, ops)
	ok := err == nil && len(res) == len(ops)
	var byKey map[string]*store.Charge
	if ok && len(charges) > 8 {
		byKey = make(map[string]*store.Charge, len(charges))
		for i := range charges {
			byKey[charges[i].Key] = &charges[i]
		}
	}
	for i := range ops {
		op, sh := &ops[i], shards[i]
		shd := &s.shards[sh]
		shd.mu.Lock()
		e := shd.entries[op.Key]
		if e != nil {
			e.inflight = false
		}
		if ok {
			took := res[i].Allowed
			switch {
			case e == nil && took:
				// Evicted during the round trip: track it again rather
				// than lose the block.
				e = s.touch(sh, op.Key, op.Limit, now)
				fallthrough
			case e != nil && e.limit == op.Limit:
				d := res[i].Decision
				e.remaining, e.known = d.Remaining, true
				e.resetAt = satAddI(now, d.ResetAfter.Microseconds())
				if took {
					var ch *store.Charge
					if byKey != nil {
						ch = byKey[op.Key]
					} else {
						ch = findCharge(charges, op.Key)
					}
					// Taken ahead, not used: the lease's idle clock runs
					// from its last use, not from this call.
					last := e.lease.lastUse
					if s.install(sh, e, *op, d, ch, now) {
						e.lease.lastUse = last
					}
					shd.counters.refills++
				}
			case took:
				// The rule changed during the round trip: the block stays
				// charged under the old one (under-admission).
				shd.counters.blocks++
				shd.counters.lapsed += op.Hits
			}
		}
		shd.mu.Unlock()
	}
	return err
}
