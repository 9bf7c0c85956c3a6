package memstore

import "time"

// Defaults of the options below.
const (
	// DefaultMaxKeys bounds the store at 2^20 keys, about 150 MiB of
	// fixed-window state (TestIdleMemoryIsReturned logs ~145 B a key): a
	// client sending unique values cannot grow the process without end.
	DefaultMaxKeys = 1 << 20
	// DefaultSweepInterval and DefaultSweepBudget give expiry at most a
	// quarter of one core, as Redis's active expiry does.
	DefaultSweepInterval = 100 * time.Millisecond
	DefaultSweepBudget   = 25 * time.Millisecond
)

// Option configures a Store.
type Option func(*Store)

// WithClock sets where the store reads time; the default is time.Now. Tests
// pass a fake clock so windows and buckets move without sleeping.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// WithMaxKeys bounds how many keys the store holds; the default is
// DefaultMaxKeys and n <= 0 means no bound. When a Take takes the store past
// the bound, the state closest to expiry anywhere in the store goes: an
// expired one if any, else a live one, counted in Evictions. Eviction fails
// open for that one key (its next request starts fresh) rather than denying
// traffic for keys the store could not fit: the state nearest expiry is the
// one that would be forgotten soonest anyway, so evicting it loses the
// least enforcement.
func WithMaxKeys(n int) Option {
	return func(s *Store) {
		s.maxKeys = max(n, 0)
	}
}

// WithSweep sets how often the background sweeper runs and how much wall
// time one pass may take; every <= 0 turns it off (call Sweep instead).
func WithSweep(every, budget time.Duration) Option {
	return func(s *Store) {
		s.sweepEvery, s.sweepBudget = every, max(budget, time.Millisecond)
	}
}
