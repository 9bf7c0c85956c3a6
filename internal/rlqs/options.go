package rlqs

import (
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Defaults (the RLQS_* settings of docs/rlqs.md).
const (
	// DefaultReportingInterval is Envoy's: its filter reports every 5 s
	// whatever the bucket's reporting_interval says.
	DefaultReportingInterval = 5 * time.Second
	// DefaultFraction is the share of what a counter has left that one
	// Envoy's grant may take.
	DefaultFraction = 0.25
	// DefaultMaxBlock bounds a block (Envoy's max_tokens is 32 bits).
	DefaultMaxBlock = 10000
	// DefaultExpiryMargin is how late an assignment may reach Envoy and
	// still expire before its window ends.
	DefaultExpiryMargin = 100 * time.Millisecond
	// DefaultMaxBuckets bounds the buckets the server tracks, across all
	// its streams (and the buckets of one report).
	DefaultMaxBuckets = 20_000
	// DefaultMaxEntries and DefaultMaxValueLen bound a bucket id as a
	// request descriptor is bounded (MAX_DESCRIPTOR_ENTRIES,
	// MAX_VALUE_LENGTH).
	DefaultMaxEntries  = 32
	DefaultMaxValueLen = 1024
)

// Option configures a Server.
type Option func(*settings)

type settings struct {
	interval    time.Duration
	fraction    float64
	maxBlock    uint64
	margin      time.Duration
	maxBuckets  int
	maxEntries  int
	maxValueLen int
	keys        config.KeyBuilder
	shadow      bool
	clock       Clock
	log         *zap.Logger
	timeout     time.Duration
	poll        time.Duration
}

func defaults() settings {
	return settings{
		interval:    DefaultReportingInterval,
		fraction:    DefaultFraction,
		maxBlock:    DefaultMaxBlock,
		margin:      DefaultExpiryMargin,
		maxBuckets:  DefaultMaxBuckets,
		maxEntries:  DefaultMaxEntries,
		maxValueLen: DefaultMaxValueLen,
		clock:       wallClock{},
		log:         zap.NewNop(),
		timeout:     time.Second,
		poll:        time.Second,
	}
}

// idle is how long a bucket may report no request before it is abandoned,
// and how long a blanket assignment that nothing but a reload changes
// lives: a minute, or twelve reporting intervals if longer.
func (s settings) idle() time.Duration { return max(time.Minute, 12*s.interval) }

// WithReportingInterval is how often Envoys report (RLQS_REPORTING_INTERVAL):
// it sizes grants and spaces Redis calls. Envoy's filter reports every 5 s.
func WithReportingInterval(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.interval = d
		}
	}
}

// WithFraction caps a grant at this share (0 < f <= 1) of what its counter
// had left when last seen (RLQS_FRACTION).
func WithFraction(f float64) Option {
	return func(s *settings) {
		if f > 0 && f <= 1 {
			s.fraction = f
		}
	}
}

// WithMaxBlock caps a block, in hits (RLQS_MAX_BLOCK; at most 2^32-1,
// Envoy's max_tokens).
func WithMaxBlock(n uint64) Option {
	return func(s *settings) {
		if n > 0 {
			s.maxBlock = min(n, 1<<32-1)
		}
	}
}

// WithExpiryMargin is how late an assignment may reach Envoy and still
// expire before its counter's window ends (RLQS_EXPIRY_MARGIN).
func WithExpiryMargin(d time.Duration) Option {
	return func(s *settings) {
		if d >= 0 {
			s.margin = d
		}
	}
}

// WithMaxBuckets bounds the buckets the server tracks across all its
// streams (RLQS_MAX_BUCKETS): a bucket past it gets no assignment, its
// reported requests recorded. A report of more buckets is refused
// (INVALID_ARGUMENT) before it is decoded.
func WithMaxBuckets(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.maxBuckets = n
		}
	}
}

// WithLimits bounds a bucket id's entries and the length of the domain and
// of each key and value, as MAX_DESCRIPTOR_ENTRIES and MAX_VALUE_LENGTH
// bound a descriptor. Zero keeps a default.
func WithLimits(maxEntries, maxValueLen int) Option {
	return func(s *settings) {
		if maxEntries > 0 {
			s.maxEntries = maxEntries
		}
		if maxValueLen > 0 {
			s.maxValueLen = maxValueLen
		}
	}
}

// WithKeyBuilder names the counters (CACHE_KEY_PREFIX), the same as the
// rate limit service's.
func WithKeyBuilder(kb config.KeyBuilder) Option {
	return func(s *settings) { s.keys = kb }
}

// WithShadowMode is SHADOW_MODE: every bucket is allowed and its reported
// requests are counted.
func WithShadowMode(on bool) Option {
	return func(s *settings) { s.shadow = on }
}

// WithClock replaces the wall clock (tests).
func WithClock(c Clock) Option {
	return func(s *settings) {
		if c != nil {
			s.clock = c
		}
	}
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.log = l
		}
	}
}

// WithStoreTimeout bounds each store call (REDIS_TIMEOUT).
func WithStoreTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.timeout = d
		}
	}
}
