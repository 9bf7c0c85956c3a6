package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// leaseGate puts the lease decorator (pkg/store/lease) over the Redis store
// once a rule leases: at startup when LEASE_ENABLED is on or the first
// config has a lease: true rule, or on the first reload that brings one.
// Until then every batch goes straight to Redis, and no sweeper runs.
// Once on it stays on: a batch without Lease ops passes the decorator
// untouched.
type leaseGate struct {
	next store.Lender
	opts []lease.Option
	log  *zap.Logger

	mu    sync.Mutex // serializes enable and Close
	store atomic.Pointer[lease.Store]
	// rules is the Dump of the config whose leases are out, so that a
	// reload that changes no rule (a SIGHUP, a touched file) keeps them.
	rules atomic.Pointer[string]
}

var _ store.Store = (*leaseGate)(nil)

// newLeaseGate wraps next (the Redis store), off until enable.
func newLeaseGate(next store.Lender, l leaseSettings, log *zap.Logger) *leaseGate {
	return &leaseGate{
		next: next,
		log:  log,
		opts: []lease.Option{
			lease.WithTarget(l.Target),
			lease.WithMaxBlock(l.MaxBlock),
			lease.WithFraction(l.Fraction),
			lease.WithIdle(l.Idle),
			lease.WithMaxAge(l.MaxAge),
			lease.WithMaxKeys(l.MaxKeys),
		},
	}
}

// Take asks the lease decorator once it is on, Redis otherwise.
func (g *leaseGate) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if l := g.store.Load(); l != nil {
		return l.Take(ctx, reqs)
	}
	return g.next.Take(ctx, reqs)
}

// enable turns the decorator on (once).
func (g *leaseGate) enable() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store.Load() == nil {
		g.store.Store(lease.New(g.next, g.opts...))
		g.log.Info("leases on: replicas may answer hot counters from blocks leased from Redis")
	}
}

// enabled reports whether the decorator is on.
func (g *leaseGate) enabled() bool { return g.store.Load() != nil }

// observe is told of every config put in force: one with a leasing rule
// (or any config under LEASE_ENABLED) turns the decorator on, and one whose
// rules differ from those the leases were taken under ends every lease,
// giving the unused hits of windows back within timeout.
func (g *leaseGate) observe(cfg *config.Config, global bool, timeout time.Duration) error {
	dump := cfg.Dump()
	prev := g.rules.Swap(&dump)
	if global || cfg.Leases() {
		g.enable()
	}
	if prev == nil || *prev == dump {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.ReturnAll(ctx)
}

// ReturnAll ends every lease, giving the unused hits of windows back.
func (g *leaseGate) ReturnAll(ctx context.Context) error {
	if l := g.store.Load(); l != nil {
		return l.ReturnAll(ctx)
	}
	return nil
}

// Stats are the decorator's counters; zero while it is off.
func (g *leaseGate) Stats() lease.Stats {
	if l := g.store.Load(); l != nil {
		return l.Stats()
	}
	return lease.Stats{}
}

// Close gives the leases back, then closes Redis (lease.Store.Close).
func (g *leaseGate) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.store.Load(); l != nil {
		return l.Close()
	}
	return g.next.Close()
}

// Unwrap is the Redis store, for the counters API.
func (g *leaseGate) Unwrap() store.Store { return g.next }

// Forget drops the blocks of keys a counters API reset deletes.
func (g *leaseGate) Forget(keys ...string) {
	if l := g.store.Load(); l != nil {
		l.Forget(keys...)
	}
}

// returnLeases ends every lease before the store closes on shutdown,
// within what is left of the shutdown timeout (deadline): a Redis that
// does not answer in time leaves the hits charged (under-admission), it
// does not hold the exit.
func (a *app) returnLeases(deadline time.Time) {
	if a.leases == nil || !a.leases.enabled() {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := a.leases.ReturnAll(ctx)
	st := a.leases.Stats()
	fields := []zap.Field{zap.Duration("took", time.Since(start)), zap.Uint64("returned_hits", st.Returned), zap.Uint64("lapsed_hits", st.Lapsed)}
	if err != nil {
		a.log.Warn("leases: returning unused hits on shutdown failed; they stay charged until their windows end",
			append(fields, zap.String("error", redactSecrets(err.Error(), a.set)))...)
		return
	}
	a.log.Info("leases returned", fields...)
}

// observeLeases follows a config put in force: see leaseGate.observe.
func (a *app) observeLeases(cfg *config.Config) {
	if a.leases == nil || cfg == nil {
		return
	}
	if err := a.leases.observe(cfg, a.set.Lease.Enabled, a.set.RedisTimeout); err != nil && !errors.Is(err, context.Canceled) {
		a.log.Warn("leases: returning unused hits after a config change failed; they stay charged until their windows end",
			zap.String("error", redactSecrets(err.Error(), a.set)))
	}
}
