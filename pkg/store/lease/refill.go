package lease

import (
	"context"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
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

// refill takes the blocks of ops (Spare ops, one per key, marked inflight;
// shards[i] and gens[i] are ops[i]'s shard and entry generation) in one
// backend call and installs those it got into the entries they were taken
// for. now was read before the call, so their deadlines are early.
func (s *Store) refill(ctx context.Context, ops []store.Request, shards []uint8, gens []uint64, now int64) error {
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
		e := s.current(sh, op.Key, gens[i])
		switch {
		case e != nil && !ok:
			e.inflight = false
		case e != nil:
			e.inflight = false
			s.installRefill(sh, e, op, res[i].Decision, chargeOf(byKey, charges, op.Key), now)
		case ok && res[i].Allowed:
			// Forgotten, evicted or started over under a new rule during
			// the round trip: the block stays charged, unused.
			shd.counters.lost(op.Hits)
		}
		shd.mu.Unlock()
	}
	return err
}

// installRefill records the backend's decision d for e's counter and
// installs the block when d admitted it.
func (s *Store) installRefill(sh uint8, e *entry, op *store.Request, d algorithms.Decision, ch *store.Charge, now int64) {
	e.learn(d, now)
	if !d.Allowed {
		return
	}
	// Taken ahead, not used: the lease's idle clock runs from its last
	// use, not from this call.
	last := e.lease.lastUse
	if s.install(sh, e, *op, d, ch, now) {
		e.lease.lastUse = last
	}
	s.shards[sh].counters.refills++
}

// chargeOf finds key's charge, in byKey when the refill was large enough
// to index them.
func chargeOf(byKey map[string]*store.Charge, charges []store.Charge, key string) *store.Charge {
	if byKey != nil {
		return byKey[key]
	}
	return findCharge(charges, key)
}
