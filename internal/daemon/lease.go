package daemon

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// leaseGate is the stack's lease decorator (pkg/store/lease) over the Redis
// store. The package runs the lifecycle: nothing runs until a batch leases,
// SetRules ends every lease when the rules change, Forget drops a reset's
// keys (the counters API finds it through the store chain), Stop gives
// every lease back on shutdown. What is left here is wiring: the LEASE_*
// settings in, log lines out.
type leaseGate struct {
	*lease.Store
	log *zap.Logger
	// announced: the "leases on" line was logged.
	announced atomic.Bool
}

// leaseOptions are the LEASE_* settings as the lease decorator's options.
func leaseOptions(l leaseSettings) []lease.Option {
	return []lease.Option{
		lease.WithTarget(l.Target),
		lease.WithMaxBlock(l.MaxBlock),
		lease.WithFraction(l.Fraction),
		lease.WithIdle(l.Idle),
		lease.WithMaxAge(l.MaxAge),
		lease.WithMaxKeys(l.MaxKeys),
	}
}

// observe is told of every config put in force: a change of its rules ends
// every lease (lease.Store.SetRules), giving the unused hits of windows
// back within timeout. The first config with a leasing rule (or any under
// LEASE_ENABLED) is logged.
func (g *leaseGate) observe(cfg *config.Config, global bool, timeout time.Duration) error {
	if (global || cfg.Leases()) && !g.announced.Swap(true) {
		g.log.Info("leases on: replicas may answer hot counters from blocks leased from Redis")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.SetRules(ctx, cfg.Dump())
}

// returnLeases ends leasing before the store closes on shutdown, within
// what is left of the shutdown timeout (deadline): the sweeper's calls are
// cancelled past it, and a Redis that does not answer in time leaves the
// hits charged (under-admission); it does not hold the exit.
func (a *app) returnLeases(deadline time.Time) {
	if a.leases == nil {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := a.leases.Stop(ctx)
	st := a.leases.Stats()
	if st.Blocks == 0 && err == nil {
		return // nothing ever leased
	}
	fields := []zap.Field{zap.Duration("took", time.Since(start)), zap.Uint64("returned_hits", st.Returned), zap.Uint64("lapsed_hits", st.Lapsed)}
	if err != nil {
		a.log.Warn("leases: returning unused hits on shutdown failed; they stay charged until their windows end",
			append(fields, zap.Error(err))...)
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
			zap.Error(err))
	}
}
