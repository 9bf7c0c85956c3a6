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
