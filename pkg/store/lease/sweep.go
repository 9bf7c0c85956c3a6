package lease

import (
	"context"
	"errors"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// fullSweepEvery is how often the sweeper visits every lease; the sweeps
// in between visit only the leases used since the last one (Tick).
const fullSweepEvery = time.Second

// sweeper ends leases as they time out and refills those running low,
// every s.every, until Stop or Close: a lease nobody touches must still
// give its hits back after LEASE_IDLE.
func (s *Store) sweeper() {
	defer close(s.stopped)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.Tick(s.now()) // a failed Return is counted in Stats
		}
	}
}

// Tick is what the sweeper does every sweep interval: a full Sweep once
// per second, and SweepUsed at the ticks in between. A replica holding
// leases of ten thousand counters visited all of them ten times a second
// (6% of its CPU on the bench's Zipf load); a lease nobody used since the
// last sweep can only have ended (idle, age, window), which a second's
// delay changes little: the request path ends such a lease itself before
// using it, and LEASE_IDLE and LEASE_MAX_AGE are tens of seconds.
func (s *Store) Tick(now time.Time) error {
	if last := s.lastFull.Load(); last == 0 || now.UnixMicro()-last >= fullSweepEvery.Microseconds() {
		return s.Sweep(now)
	}
	return s.SweepUsed(now)
}

// Sweep visits every lease at now: it ends those that are over (their
// window or last slot, idleness, age), renews those LEASE_MAX_AGE is about
// to end (renew), and refills the window leases running low (refill
// ahead). It gives back, in one Return, the unused hits of the window
// leases it ended, of those ended on the request path since the last
// call, and what renewals trim; and it takes the refills in one more call.
// Both calls derive from the store's life (Stop and Close cancel them)
// and share returnTimeout. Tick calls it; tests call it with a fake clock.
// An error is the backend's: returned hits stay charged.
func (s *Store) Sweep(now time.Time) error {
	return s.sweep(now.UnixMicro(), true)
}

// SweepUsed is Sweep for the leases used since the last sweep only: the
// ones whose room fell, and so the only ones a refill can be due for.
func (s *Store) SweepUsed(now time.Time) error {
	return s.sweep(now.UnixMicro(), false)
}

func (s *Store) sweep(us int64, full bool) error {
	prev := s.lastSweep.Swap(us)
	// A lease nobody uses is visited only by full sweeps: renew keeps it
	// when its age runs out before the full sweep after next (the next
	// is about as far off as the last one was).
	lastFull := s.lastFull.Load()
	if full {
		s.lastFull.Store(us)
	}
	var gap int64
	if lastFull != 0 {
		gap = max(us-lastFull, 0)
	}
	w := sweepWork{s: s, us: us, prev: prev, gap: gap}
	ctx, cancel := context.WithTimeout(s.life, returnTimeout)
	defer cancel()
	s.giving.RLock()
	s.visitAll(&w, full)
	err := s.giveBack(ctx, s.takePending(w.charges))
	s.giving.RUnlock()
	if len(w.refills) > 0 {
		err = errors.Join(err, s.refill(ctx, w.refills, w.refillShards, w.refillGens, us))
	}
	return err
}

// visitAll visits every lease (full) or those used since the last sweep.
func (s *Store) visitAll(w *sweepWork, full bool) {
	for i := range s.shards {
		shd := &s.shards[i]
		shd.mu.Lock()
		if full {
			// From the end: ending a lease moves the last entry into its
			// slot.
			for j := len(shd.leased) - 1; j >= 0; j-- {
				w.visit(uint8(i), shd.leased[j])
			}
		}
		for j, e := range shd.used {
			e.used = false
			shd.used[j] = nil
			if !full && e.slot != 0 {
				w.visit(uint8(i), e)
			}
		}
		shd.used = shd.used[:0]
		shd.mu.Unlock()
	}
}

// sweepWork is one sweep's time and what it gathers for the backend.
type sweepWork struct {
	s             *Store
	us, prev, gap int64
	charges       []store.Charge
	refills       []store.Request
	refillShards  []uint8
	refillGens    []uint64
}

// visit ends, renews or refills e's lease at w.us; the caller holds the
// shard.
func (w *sweepWork) visit(sh uint8, e *entry) {
	s, us := w.s, w.us
	renewed := false
	if !s.spent(&e.lease, us) && s.agingOut(&e.lease, us, w.gap) {
		var ch store.Charge
		if ch, renewed = s.renew(sh, e, us); ch.Applied > 0 {
			w.charges = append(w.charges, ch)
		}
	}
	if !renewed && s.over(&e.lease, us) {
		if ch, ok := s.endInto(sh, e, us); ok {
			w.charges = append(w.charges, ch)
		}
		return
	}
	if e.lease.kind == bucket {
		// Count the slots already past their deadlines, so that
		// Outstanding (what a crash would lose) stays exact.
		if n := e.lease.use(us, 0); n > 0 {
			s.shards[sh].counters.lapse(n)
		}
		return
	}
	if !renewed && w.prev != 0 && e.lease.lastUse < w.prev {
		// Unused since the last sweep, which saw the same room and a
		// block no smaller than now (the rate estimate only decays
		// without hits): most leases, most sweeps.
		return
	}
	if b := s.refillWanted(e, us); b > 0 {
		e.inflight = true
		w.refills = append(w.refills, store.Request{Key: e.key, Limit: e.limit, Hits: b, Mode: algorithms.Spare})
		w.refillShards = append(w.refillShards, sh)
		w.refillGens = append(w.refillGens, e.gen)
	}
}
