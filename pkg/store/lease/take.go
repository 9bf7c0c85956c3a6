package lease

import (
	"context"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// The request path: a batch is answered from its keys' leases when every op
// can be (answer); otherwise it goes to the backend with a Spare op for
// each hot key that needs a block (plan), and the answer updates what the
// replica knows of its keys and installs the blocks taken (learn). An op
// that is not eligible always reaches the backend, a refund among them:
// learn records its answer like any other, so the replica's view of the
// counter follows the refund, and the lease keeps its block (charged
// before the refund, given back as usual).

// Take answers reqs from leases when every op can be, and otherwise from
// the backend, topping up leases of hot keys in the same call.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if !anyLease(reqs) || s.closed.Load() {
		// After Stop nothing is leased: a block taken would only lapse.
		return s.next.Take(ctx, reqs)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.start()
	// Read before the round trip: the backend decides at or after it, so
	// deadlines measured from here are early, never late.
	b := batch{now: s.now().UnixMicro()}
	var ibuf [8]uint8
	var gbuf [8]uint64
	b.idx = s.shardsOf(reqs, ibuf[:0])
	b.gens = gbuf[:]
	if len(reqs) > len(gbuf) {
		b.gens = make([]uint64, len(reqs))
	}
	mask := maskOf(reqs, b.idx)
	s.lock(mask)
	if res, ok := s.answer(reqs, &b); ok {
		s.unlock(mask)
		return res, nil
	}
	ext := s.plan(reqs, &b)
	s.unlock(mask)

	if len(ext) == len(reqs) {
		res, err := s.next.Take(ctx, reqs)
		if err == nil {
			s.lock(mask)
			s.learn(reqs, ext, &b, res, nil)
			s.unlock(mask)
		}
		return res, err
	}
	res, charges, err := s.next.TakeCharged(ctx, ext)
	s.lock(mask)
	if err != nil {
		s.abandon(reqs, ext, &b)
	} else {
		s.learn(reqs, ext, &b, res, charges)
	}
	s.unlock(mask)
	if err != nil {
		return nil, err
	}
	// The caller sees only its own ops' results.
	return res[:len(reqs):len(reqs)], nil
}

// batch is what the replica notes of a Take with a Lease op, beside its
// ops (reqs) and the backend batch (ext: reqs, then the Spare ops of the
// blocks it takes): each op's shard (idx), its key's entry generation
// when the batch was answered or planned (gens; Lease ops only), and when
// (now). It holds nothing the backend sees, so that its buffers stay on
// the stack.
type batch struct {
	idx  []uint8
	gens []uint64
	now  int64
}

// anyLease reports whether any op's rule allows leasing.
func anyLease(reqs []store.Request) bool {
	for i := range reqs {
		if reqs[i].Lease {
			return true
		}
	}
	return false
}

// eligible reports whether op could be answered from a lease: a plain
// enforced hit. A check or a usage report must reach the backend, and a
// shadow or quota denial does not decide the batch the way a lease's
// admission does; any op that is not eligible reaches the backend, as a
// refund would.
func eligible(op *store.Request) bool {
	return op.Lease && (op.Mode == algorithms.Enforce || op.Mode == 0) && !op.Usage && op.Hits > 0
}

// hitsOn is the hits of reqs' eligible ops on reqs[i]'s key.
func hitsOn(reqs []store.Request, i int) uint64 {
	var h uint64
	for j := i; j < len(reqs); j++ {
		if reqs[j].Key == reqs[i].Key && eligible(&reqs[j]) {
			h += reqs[j].Hits
		}
	}
	return h
}

// usageOn reports whether a usage op in reqs charges key.
func usageOn(reqs []store.Request, key string) bool {
	for i := range reqs {
		if reqs[i].Usage && reqs[i].Hits > 0 && reqs[i].Key == key {
			return true
		}
	}
	return false
}

// answer admits the batch from its keys' leases if every op can be, with
// the shards locked, and notes each Lease op's entry generation. It
// allocates nothing but the results.
func (s *Store) answer(reqs []store.Request, b *batch) ([]store.Result, bool) {
	now := b.now
	var buf [8]*entry
	ents := buf[:0]
	ok := true
	for i := range reqs {
		op := &reqs[i]
		var e *entry
		if op.Lease {
			e = s.touch(b.idx[i], op.Key, op.Limit, now)
			b.gens[i] = e.gen
			if eligible(op) {
				e.observe(now, s.interval, op.Hits)
			}
		}
		ents = append(ents, e)
		if !ok || !eligible(op) || e.lease.kind == none || e.lease.limit != op.Limit {
			ok = false
			continue
		}
		if !store.NamedBefore(reqs, i) && e.lease.room(now) < hitsOn(reqs, i) {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	res := make([]store.Result, len(reqs))
	for i := range reqs {
		s.admit(b.idx[i], ents[i], reqs[i].Hits, now, &res[i])
	}
	return res, true
}

// admit takes hits from e's lease, which has room for them, into r.
func (s *Store) admit(sh uint8, e *entry, hits uint64, now int64, r *store.Result) {
	shd, l := &s.shards[sh], &e.lease
	c := &shd.counters
	if lapsed := l.use(now, hits); lapsed > 0 {
		c.lapse(lapsed)
	}
	l.lastUse = now
	if !e.used {
		e.used = true
		shd.used = append(shd.used, e)
	}
	c.localHits += hits
	c.outstanding -= int64(hits)
	capacity := l.limit.Requests
	if l.kind == bucket {
		capacity = l.limit.Capacity()
	}
	r.Allowed, r.Applied = true, hits
	r.Remaining = min(satmath.Add(e.remaining, l.room(now)), capacity)
	r.ResetAfter = time.Duration(max(e.resetAt-now, 0)) * time.Microsecond
}

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
		if e == nil || e.inflight || !e.known || e.limit != op.Limit || !op.Limit.Leasable() {
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
		if l.kind == window && l.limit == nl.limit && l.after.Window().Start == nl.after.Window().Start && l.room(now) > 0 {
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
