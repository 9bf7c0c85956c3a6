package memstore

import "time"

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

// WithMaxKeys bounds how many keys the store holds; n <= 0 (the default)
// means no bound. A new key arriving at the bound first drops every expired
// state; if none has expired, the state closest to expiry is evicted and
// counted in Evictions. Eviction fails open for that one key (its next
// request starts fresh) rather than denying traffic for keys the store could
// not fit: the state nearest expiry is the one that would be forgotten
// soonest anyway, so evicting it loses the least enforcement.
func WithMaxKeys(n int) Option {
	return func(s *Store) {
		s.maxKeys = max(n, 0)
	}
}
