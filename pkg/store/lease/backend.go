package lease

import (
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// plan prepares the backend batch, with the shards locked: reqs, then one
// Spare op per key that is hot, leasable, in reqs as an enforced hit and
// without a lease with room for the batch's hits on it. It returns reqs
// itself when no key needs a block.
func (s *Store) plan(reqs []store.Request, b *batch) []store.Request {
	now := b.now
	ext := reqs
	for i := range reqs {
		op := &reqs[i]
		if !eligible(op) || store.NamedBefore(reqs, i) {
			continue
		}
		e := s.shards[b.idx[i]].entries[op.Key]
		if e == nil || e.inflight || !e.known || e.limit != op.Limit || !Leasable(op.Limit) {
			continue
		}
		if usageOn(reqs, op.Key) {
			// A block beside usage on its key would share its charge with
			// what the usage applies (never given back): a window block
			// must be returnable alone.
			continue
		}
		hits := hitsOn(reqs, i)
		if e.lease.kind != none && e.lease.limit == op.Limit && e.lease.room(now) >= hits {
			// It has room: another key kept the batch from being local.
			continue
		}
		size := s.blockSize(e, now, hits)
		if size < 2 || size <= hits {
			continue
		}
		if len(ext) == len(reqs) {
			ext = make([]store.Request, len(reqs), len(reqs)+len(reqs)-i)
			copy(ext, reqs)
		}
		e.inflight = true
		ext = append(ext, store.Request{Key: op.Key, Limit: op.Limit, Hits: size, Mode: algorithms.Spare})
	}
	return ext
}

// current is key's entry if it is still the one of generation gen: not
// forgotten, evicted or started over under a new rule since.
func (s *Store) current(sh uint8, key string, gen uint64) *entry {
	if e := s.shards[sh].entries[key]; e != nil && e.gen == gen {
		return e
	}
	return nil
}

// abandon clears the top-ups of a batch the backend failed.
func (s *Store) abandon(reqs, ext []store.Request, b *batch) {
	for _, sp := range ext[len(reqs):] {
		i := firstOn(reqs, sp.Key)
		if e := s.current(b.idx[i], sp.Key, b.gens[i]); e != nil {
			e.inflight = false
		}
	}
}

// firstOn is the index of key's first op in reqs (it is there).
func firstOn(reqs []store.Request, key string) int {
	for i := range reqs {
		if reqs[i].Key == key {
			return i
		}
	}
	return -1
}

// learn records the backend's answer with the shards locked: each leased
// key's latest Remaining and reset, and the blocks its Spare ops took.
// charges is nil when the batch had no Spare op. An answer for an entry
// that is no longer current (Forget, eviction or a changed rule during the
// round trip) is of a counter the replica no longer tracks as it was: the
// block it took stays charged (under-admission) and is never used, so that
// a block taken before a reset cannot admit hits after it.
func (s *Store) learn(reqs, ext []store.Request, b *batch, res []store.Result, charges []store.Charge) {
	if len(res) != len(ext) {
		// Not an answer to this batch: learn nothing, but let the keys
		// top up again.
		s.abandon(reqs, ext, b)
		return
	}
	admitted := len(ext) > len(reqs) && !store.VerdictOf(reqs, res[:len(reqs)]).Denied()
	for i := range reqs {
		op := &reqs[i]
		if !op.Lease || store.NamedBefore(reqs, i) {
			continue
		}
		last, spare := lastOn(ext, i, len(reqs))
		took := spare >= 0 && admitted && res[spare].Allowed
		sh := b.idx[i]
		e := s.current(sh, op.Key, b.gens[i])
		if e == nil {
			if took {
				s.shards[sh].counters.lost(ext[spare].Hits)
			}
			continue
		}
		if spare >= 0 {
			e.inflight = false
		}
		d := res[last].Decision
		e.learn(d, b.now)
		if took {
			s.install(sh, e, ext[spare], d, findCharge(charges, op.Key), b.now)
		}
	}
}

// lastOn is the index in ext of the last op on ext[i]'s key (it saw every
// charge the batch made to it) and of its Spare op (-1: none), the ops
// from n on being Spare ops.
func lastOn(ext []store.Request, i, n int) (last, spare int) {
	last, spare = i, -1
	for j := i + 1; j < len(ext); j++ {
		if ext[j].Key == ext[i].Key {
			last = j
			if j >= n {
				spare = j
			}
		}
	}
	return last, spare
}

func findCharge(charges []store.Charge, key string) *store.Charge {
	for i := range charges {
		if charges[i].Key == key {
			return &charges[i]
		}
	}
	return nil
}

// install makes a block of sp.Hits, which the backend decided as d when
// asked at now, into e's lease; merged says it joined the lease e held
// (same window) rather than starting one.
func (s *Store) install(sh uint8, e *entry, sp store.Request, d algorithms.Decision, ch *store.Charge, now int64) (merged bool) {
	size := sp.Hits
	c := &s.shards[sh].counters
	c.blocks++
	c.outstanding += int64(size)
	if s.closed.Load() {
		// Stop has given everything back already: hold nothing more.
		c.lapse(size)
		return false
	}
	nl := newLease(sp.Limit, size, d, now)
	switch {
	case nl.kind == window && ch == nil, nl.kind == none:
		// Without the charge's state a window block could not be given
		// back exactly: do not use it.
		c.lapse(size)
		return false
	case nl.kind == window:
		nl.after = ch.After
		l := &e.lease
		if l.kind == window && l.limit == nl.limit && algorithms.ViewOf[algorithms.Window](l.after).Start == algorithms.ViewOf[algorithms.Window](nl.after).Start && l.room(now) > 0 {
			// Same window: one lease, one return of what is left of both.
			l.size += size
			l.deadline = min(l.deadline, nl.deadline)
			l.after = nl.after
			l.lastUse = now
			return true
		}
	}
	s.end(sh, e, now)
	e.lease = nl
	s.shards[sh].addLeased(e)
	return false
}
