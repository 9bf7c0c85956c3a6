// Package stack builds the store ratelimitd's daemon decides on, layer by
// layer, for a Go program that wants exactly that store:
//
//	tracing (WithTracing) → fallback (WithFallback, Redis only) → localcache (WithLocalCache) → lease (Redis only) → redisstore | memstore
//
// On Redis the lease decorator is always there: it runs nothing until a
// batch leases (a rule's lease: true, or service.WithLease). The local cache
// hears of the refunds, Cluster undos, lease returns and resets made by
// other replicas on the same Redis (redisstore.WithKeyPrefix names their
// channel).
package stack

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// Stack is a built store: Store is its outermost layer, the one to take
// from and close; the other fields are its layers, for their statistics and
// controls (nil when absent).
type Stack struct {
	Store store.Store

	Redis    *redisstore.Store
	Memory   *memstore.Store
	Lease    *lease.Store
	Cache    *localcache.Store
	Fallback *fallback.Store
}

// Close closes every layer, outermost first.
func (s *Stack) Close() error { return s.Store.Close() }

// Option configures New.
type Option func(*config)

type config struct {
	redis      bool
	redisOpts  []redisstore.Option
	memOpts    []memstore.Option
	leaseOpts  []lease.Option
	cacheBytes int
	cacheOpts  []localcache.Option
	fallback   fallbackConfig
	tracer     trace.TracerProvider
}

// WithRedis keeps the counters in Redis (redisstore.New(opts...)) instead
// of the embedded store.
func WithRedis(opts ...redisstore.Option) Option {
	return func(c *config) { c.redis, c.redisOpts = true, append(c.redisOpts, opts...) }
}

// WithMemory configures the embedded store, used unless WithRedis is given.
func WithMemory(opts ...memstore.Option) Option {
	return func(c *config) { c.memOpts = append(c.memOpts, opts...) }
}

// WithLease configures the lease decorator over Redis (ignored on the
// embedded store, which never leases: its counters are local already).
func WithLease(opts ...lease.Option) Option {
	return func(c *config) { c.leaseOpts = append(c.leaseOpts, opts...) }
}

// WithLocalCache puts a local over-limit cache of at most maxBytes over
// the store; maxBytes <= 0 leaves it out. On Redis, the stack adds the
// notices' subscription (localcache.WithInvalidations) after opts.
func WithLocalCache(maxBytes int, opts ...localcache.Option) Option {
	return func(c *config) { c.cacheBytes, c.cacheOpts = maxBytes, append(c.cacheOpts, opts...) }
}

// WithTracing adds a span per Take ("ratelimitd.store.Take") from tp's
// tracer; nil leaves tracing out.
func WithTracing(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracer = tp }
}

// New builds the stack bottom up. On error nothing is left open.
func New(opts ...Option) (*Stack, error) {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	s := &Stack{}
	backend := "memory"
	if c.redis {
		rs, err := redisstore.New(c.redisOpts...)
		if err != nil {
			return nil, fmt.Errorf("redis store: %w", err)
		}
		s.Redis, s.Lease, backend = rs, lease.New(rs, c.leaseOpts...), "redis"
		s.Store = s.Lease
		// The subscription starts with the cache; it is added last so that
		// it is the Redis store's, whatever opts say.
		c.cacheOpts = append(c.cacheOpts, localcache.WithInvalidations(rs.WatchRefunds))
	} else {
		s.Memory = memstore.New(c.memOpts...)
		s.Store = s.Memory
	}
	if c.cacheBytes > 0 {
		s.Cache = localcache.New(s.Store, c.cacheBytes, c.cacheOpts...)
		s.Store = s.Cache
	}
	if c.fallback.on && s.Redis != nil {
		s.newFallback(c.fallback)
	}
	if c.tracer != nil {
		s.Store = newTraced(s.Store, c.tracer.Tracer(tracerName), backend)
	}
	return s, nil
}

// tracerName is the instrumentation scope of the store's spans.
const tracerName = "github.com/ratelimitd/ratelimitd"
