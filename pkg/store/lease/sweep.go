package lease

import (
	"context"
	"errors"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// sweeper ends leases as they time out, every s.every, until Close: a lease
// nobody touches must still give its hits back after LEASE_IDLE.
func (s *Store) sweeper() {
	defer close(s.stopped)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.Sweep(s.now()) // a failed Return is counted in Stats
		}
	}
}

// Sweep ends every lease that is over at now (its window or last slot,
// idleness, age) and gives back, in one Return, the unused hits of the
// window leases among them, of those ended on the request path since the
// last call, and what renew trims. In one more call it takes the blocks of
// window leases running low (refill ahead). The sweeper calls it; tests
// call it with a fake clock. An error is the backend's on Return: those
// hits stay charged.
func (s *Store) Sweep(now time.Time) error {
	us := now.UnixMicro()
	// The next sweep is about as far off as the last one was.
	prev := s.lastSweep.Swap(us)
	var gap int64
	if prev != 0 {
		gap = max(us-prev, 0)
	}
	var charges []store.Charge
	var refills []store.Request
	var refillShards []uint8
	for i := range s.shards {
		shd := &s.shards[i]
		shd.mu.Lock()
		// From the end: ending a lease moves the last entry into its slot.
		for j := len(shd.leased) - 1; j >= 0; j-- {
			e := shd.leased[j]
			renewed := false
			if !s.spent(&e.lease, us) && s.agingOut(&e.lease, us, gap) {
				var ch store.Charge
				if ch, renewed = s.renew(uint8(i), e, us); ch.Hits > 0 {
					charges = append(charges, ch)
				}
			}
			if !renewed && s.over(&e.lease, us) {
				if ch, ok := s.endInto(uint8(i), e, us); ok {
					charges = append(charges, ch)
				}
				continue
			}
			if e.lease.kind == bucket {
				// Count the slots already past their deadlines, so that
				// Outstanding (what a crash would lose) stays exact.
				if n := e.lease.use(us, 0); n > 0 {
					shd.counters.lapse(n)
				}
				continue
			}
			if !renewed && prev != 0 && e.lease.lastUse < prev {
				// Unused since the last sweep, which saw the same room and
				// a block no smaller than now (the rate estimate only
				// decays without hits): most leases, most sweeps.
				continue
			}
			if b := s.refillWanted(e, us); b > 0 {
				e.inflight = true
				refills = append(refills, store.Request{Key: e.key, Limit: e.limit, Hits: b, Mode: algorithms.Spare})
				refillShards = append(refillShards, uint8(i))
			}
		}
		shd.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), returnTimeout)
	defer cancel()
	err := s.giveBack(ctx, s.takePending(charges))
	if len(refills) > 0 {
		err = errors.Join(err, s.refill(ctx, refills, refillShards, us))
	}
	return err
}

// agingOut reports whether LEASE_MAX_AGE ends l before the sweep after
// next (gap is the time since the last sweep): renew keeps it then, since
// the request that found it aged out would take its counter to the
// backend.
func (s *Store) agingOut(l *lease, now, gap int64) bool {
	return s.maxAge > 0 && now-l.born >= s.maxAge-2*gap
}

// ReturnAll ends every lease now and gives the unused hits of window
// leases back in one Return (on config reload: blocks were taken under the
// old rules). Bucket slots lapse.
func (s *Store) ReturnAll(ctx context.Context) error {
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
		hits += charges[i].Hits
	}
	if err := s.next.Return(ctx, charges); err != nil {
		s.returnLapsed.Add(hits)
		s.returnErrors.Add(1)
		return err
	}
	s.returned.Add(hits)
	return nil
}

// Close stops the sweeper, gives back every lease (within a bounded time:
// SIGTERM must not hang on a dead backend), then closes the wrapped store.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.every > 0 {
			close(s.stop)
		}
		<-s.stopped
		ctx, cancel := context.WithTimeout(context.Background(), returnTimeout)
		defer cancel()
		s.closeErr = errors.Join(s.ReturnAll(ctx), s.next.Close())
	})
	return s.closeErr
}
