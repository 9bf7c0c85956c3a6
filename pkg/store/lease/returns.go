package lease

import (
	"context"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Ending leases and giving their unused hits back. What an ending gives
// back is policy (givesBack); here is how: the request path parks the
// charges in pending, and a sweep or ReturnAll returns them with its own
// in one backend call.

// end ends e's lease on the request path, if it has one: a window's
// unused hits wait in pending for the next Sweep or ReturnAll, so that no
// request waits for a Return.
func (s *Store) end(sh uint8, e *entry, now int64) {
	if e.lease.kind == none {
		return
	}
	if ch, ok := s.endInto(sh, e, now); ok {
		s.pendMu.Lock()
		s.pending = append(s.pending, ch)
		s.pendMu.Unlock()
	}
}

// endInto ends e's lease and returns the charge to give back, if any
// (givesBack). Everything else unused lapses.
func (s *Store) endInto(sh uint8, e *entry, now int64) (store.Charge, bool) {
	l := e.lease
	e.lease = lease{}
	e.paid = l.kind == window && l.used > 0
	s.shards[sh].dropLeased(e)
	unused := l.unused()
	switch {
	case unused == 0:
		return store.Charge{}, false
	case !givesBack(&l, now):
		s.shards[sh].counters.lapse(unused)
		return store.Charge{}, false
	}
	return s.giveBackCharge(sh, e.key, &l, unused), true
}

// giveBackCharge is the charge that gives hits of window lease l of key
// back, which they leave Outstanding for.
func (s *Store) giveBackCharge(sh uint8, key string, l *lease, hits uint64) store.Charge {
	s.shards[sh].counters.outstanding -= int64(hits)
	return store.Charge{Key: key, Limit: l.limit, Applied: hits, After: l.after}
}

// ReturnAll ends every lease now and gives the unused hits of window
// leases back in one Return (on config reload: blocks were taken under the
// old rules). Bucket slots lapse.
func (s *Store) ReturnAll(ctx context.Context) error {
	s.giving.RLock()
	defer s.giving.RUnlock()
	us := s.now().UnixMicro()
	var charges []store.Charge
	for i := range s.shards {
		shd := &s.shards[i]
		shd.mu.Lock()
		for j := len(shd.leased) - 1; j >= 0; j-- {
			if ch, ok := s.endInto(uint8(i), shd.leased[j], us); ok {
				charges = append(charges, ch)
			}
		}
		shd.mu.Unlock()
	}
	return s.giveBack(ctx, s.takePending(charges))
}

// takePending appends the charges waiting in pending to charges.
func (s *Store) takePending(charges []store.Charge) []store.Charge {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	charges = append(charges, s.pending...)
	s.pending = nil
	return charges
}

// giveBack returns charges in one backend call. On failure their hits stay
// charged: under-admission, counted as lapsed.
func (s *Store) giveBack(ctx context.Context, charges []store.Charge) error {
	if len(charges) == 0 {
		return nil
	}
	var hits uint64
	for i := range charges {
		hits += charges[i].Applied
	}
	if err := s.next.Return(ctx, charges); err != nil {
		s.returnLapsed.Add(hits)
		s.returnErrors.Add(1)
		return err
	}
	s.returned.Add(hits)
	return nil
}
