package lease

import (
	"context"
	"hash/maphash"
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/shardlock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Defaults of the options (the LEASE_* settings).
const (
	DefaultTarget        = 5 * time.Second
	DefaultMaxBlock      = 1000
	DefaultFraction      = 0.1
	DefaultIdle          = 30 * time.Second
	DefaultMaxAge        = 30 * time.Second
	DefaultMaxKeys       = 100000
	DefaultSweepInterval = 100 * time.Millisecond
	// returnTimeout bounds each sweep's backend calls (its Return and its
	// refill, which share it) and Close's Return: a backend that does not
	// answer leaves the hits charged (under-admission) rather than holding
	// the sweeper or shutdown. A caller with a deadline of its own uses Stop.
	returnTimeout = 5 * time.Second
)

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

// WithTarget sets how long a block should last at the replica's observed
// rate of its counter; it is also the span that rate is measured over.
// d <= 0 keeps DefaultTarget.
func WithTarget(d time.Duration) Option {
	return func(s *Store) {
		if us := d.Microseconds(); us > 0 {
			s.interval = us
		}
	}
}

// WithMaxBlock bounds a block's hits; below 2 nothing is leased.
func WithMaxBlock(n uint64) Option { return func(s *Store) { s.maxBlock = n } }

// WithFraction bounds a block to this fraction of what its counter had
// left (clamped to 0..1; 0 leases nothing).
func WithFraction(f float64) Option {
	return func(s *Store) {
		if math.IsNaN(f) {
			f = 0
		}
		s.fraction = min(max(f, 0), 1)
	}
}

// WithIdle ends a lease unused this long; d <= 0 never ends one for
// idleness (its window or slots still end it).
func WithIdle(d time.Duration) Option { return func(s *Store) { s.idle = max(d.Microseconds(), 0) } }

// WithMaxAge re-sizes a lease this long after it began: the sweeper keeps
// a window lease that a block would be taken for now, trimmed to one and
// a half such blocks (renew in policy.go), and ends any other; d <= 0
// never does.
func WithMaxAge(d time.Duration) Option {
	return func(s *Store) { s.maxAge = max(d.Microseconds(), 0) }
}

// WithMaxKeys bounds the counters whose rate the replica tracks (n <= 0: no
// bound). The bound is kept per shard (n/64 rounded up each), dropping the
// least recently seen key of the shard (to within a second: a key's place
// moves at most once a second), so the total may pass n by < 64.
func WithMaxKeys(n int) Option {
	return func(s *Store) {
		s.perShard = 0
		if n > 0 {
			s.perShard = (n + shardlock.N - 1) / shardlock.N
		}
	}
}

// WithRefillAhead says whether Sweep tops up window leases whose room fell
// to half a block or less (default true), so that a warm counter's requests do
// not go to the backend when its lease runs out.
func WithRefillAhead(on bool) Option { return func(s *Store) { s.refillAhead = on } }

// WithSweep sets how often the background sweeper (Tick) ends leases,
// gives their hits back and refills them; every <= 0 runs no sweeper, and
// the caller calls Tick or Sweep (tests do, on a fake clock): what they
// give back and the leases used since the last sweep wait for it.
func WithSweep(every time.Duration) Option { return func(s *Store) { s.every = every } }

// New wraps next. Nothing runs until a batch with a Lease op comes: then
// the sweeper starts, and Stop or Close ends it.
func New(next store.Lender, opts ...Option) *Store {
	s := &Store{
		Decorator:   store.Decorate(next),
		next:        next,
		now:         time.Now,
		interval:    DefaultTarget.Microseconds(),
		maxBlock:    DefaultMaxBlock,
		fraction:    DefaultFraction,
		idle:        DefaultIdle.Microseconds(),
		maxAge:      DefaultMaxAge.Microseconds(),
		every:       DefaultSweepInterval,
		seed:        maphash.MakeSeed(),
		refillAhead: true,
	}
	s.stop, s.stopped = make(chan struct{}), make(chan struct{})
	s.life, s.cancel = context.WithCancel(context.Background())
	WithMaxKeys(DefaultMaxKeys)(s)
	for _, opt := range opts {
		opt(s)
	}
	for i := range s.shards {
		s.shards[i].init()
	}
	return s
}
