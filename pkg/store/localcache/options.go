package localcache

import "time"

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (tests step a fake one); default time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// WithMaxAge answers from a cached denial for at most d after the backend
// last gave it, however long the denial holds: the bound on a stale answer
// when this replica misses an invalidation (a refund, an undo, a return or
// a reset on another replica, see Invalidate). Zero (the default) keeps an
// entry until its denial lifts.
func WithMaxAge(d time.Duration) Option {
	return func(s *Store) { s.maxAge = max(d, 0) }
}

// WithInvalidations runs watch from New until Close, feeding Invalidate
// and Flush: how refunds, undos, returns and resets on other replicas
// reach this one.
func WithInvalidations(watch Watch) Option {
	return func(s *Store) { s.watch = watch }
}
