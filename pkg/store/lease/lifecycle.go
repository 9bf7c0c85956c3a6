package lease

import (
	"context"
	"errors"
)

// The lifecycle a program that loads rules needs, so that it embeds
// leases with this package alone: the sweeper starts at the first batch
// that leases, SetRules ends every lease when the rules change, Forget
// (forget.go) drops what a counters reset deletes, and Stop and Close end
// leasing within a deadline.

// start runs the sweeper, once, unless the store is stopped or runs none
// (WithSweep(0)). Take calls it at every batch with a Lease op, so that a
// store whose rules never lease runs no goroutine.
func (s *Store) start() {
	if s.every <= 0 || s.started.Load() {
		return
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.started.Load() || s.closed.Load() {
		return
	}
	s.started.Store(true)
	go s.sweeper()
}

// halt ends leasing for good: no sweeper starts after it, a running one
// ends after its current sweep, and blocks taken from now on are not used.
func (s *Store) halt() {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.closed.Swap(true) {
		return
	}
	close(s.stop)
	if !s.started.Load() {
		close(s.stopped)
	}
}

// SetRules tells the store which rules are in force, by a fingerprint that
// changes whenever a rule does (ratelimitd passes its config's dump). When
// it changes, every lease ends and the unused hits of windows go back
// within ctx, so that new limits apply at once: blocks were sized, and
// windows keyed, under the old rules. The first call only records the
// fingerprint, and so does one that repeats it (a reload that changed no
// rule keeps the leases).
func (s *Store) SetRules(ctx context.Context, fingerprint string) error {
	prev := s.rules.Swap(&fingerprint)
	if prev == nil || *prev == fingerprint {
		return nil
	}
	return s.ReturnAll(ctx)
}

// Stop ends leasing for good within ctx: the sweeper stops (a sweep in
// progress may finish while ctx allows; past ctx its backend calls are
// cancelled), and every lease ends, the unused hits of windows going back
// in one Return within ctx. A backend that does not answer in time leaves
// them charged (under-admission) rather than holding the caller. Batches
// still pass straight through to the backend afterwards, taking no block
// (a block in flight lapses). The wrapped store stays open: Close closes
// it.
func (s *Store) Stop(ctx context.Context) error {
	s.halt()
	select {
	case <-s.stopped:
	case <-ctx.Done():
		// Here, not in a context.AfterFunc, whose callback starts after Done
		// closes: returning first stopped it, and Close then waited out the
		// sweeper's call.
		s.cancel()
	case <-s.life.Done():
		// An earlier Stop ran out of time: the sweeper's calls are
		// cancelled already, and waiting again would overrun this one.
	}
	return s.ReturnAll(ctx)
}

// Close is Stop within returnTimeout (nothing is left to give back after
// an earlier Stop), then cancels the store's context, closes the wrapped
// store, and waits for the sweeper, whose calls the first two ended.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), returnTimeout)
		err := s.Stop(ctx)
		cancel()
		s.cancel()
		s.closeErr = errors.Join(err, s.next.Close())
		<-s.stopped
	})
	return s.closeErr
}
