package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
)

// outcome is what an error says about whether Redis ran the command.
type outcome uint8

const (
	// notRun: the command certainly did not run (no connection, or Redis
	// refused it before executing: a redirect, a cluster or replica state, a
	// script or function it does not hold).
	// Safe to retry after refreshing the topology.
	notRun outcome = iota + 1
	// unknown: the command may have run (timeout or broken connection after
	// it was written). Never retried: a take would charge twice.
	unknown
	// failed: Redis ran and rejected it (a script error); the topology is fine.
	failed
	// shed: the node's breaker refused it (it certainly did not run); the
	// node is down, so waiting for it would only spend the caller's
	// deadline. Not retried; the topology is refreshed, since on Cluster a
	// replica may be taking the node's slots over.
	shed
)

// classify tells certainly-not-run errors from outcome-unknown ones.
// go-redis retries are off (MaxRetries and MaxRedirects -1), so every error
// surfaces here and this is the only place that decides a retry.
func classify(err error) outcome {
	if errors.Is(err, ErrBreakerOpen) {
		return shed
	}
	if _, ok := redis.IsMovedError(err); ok {
		return notRun
	}
	if _, ok := redis.IsAskError(err); ok {
		return notRun
	}
	if redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || redis.IsLoadingError(err) ||
		redis.IsReadOnlyError(err) || redis.HasErrorPrefix(err, "NOSCRIPT") || redis.HasErrorPrefix(err, "MASTERDOWN") ||
		scripts.FunctionMissing(err) {
		return notRun
	}
	// A pool that was closed (a node dropped from the slot map) or had no
	// free connection never wrote the command.
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return notRun
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return notRun
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return notRun
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		return failed
	}
	return unknown
}

// refresher asks the client to reload its topology (the Cluster slot map),
// at most once per interval, so that a burst of failing calls costs Redis
// one CLUSTER SLOTS, not thousands.
type refresher struct {
	reload   func()
	interval time.Duration

	mu   sync.Mutex
	last time.Time
}

func newRefresher(c redis.UniversalClient, interval time.Duration) *refresher {
	r := &refresher{interval: interval}
	switch c := c.(type) {
	case *redis.ClusterClient:
		// ReloadState runs in the background and keeps one reload in
		// flight at most (go-redis coalesces requests during a reload).
		r.reload = func() { c.ReloadState(context.Background()) }
	default:
		// Single and Sentinel: go-redis's Sentinel dialer asks Sentinel for
		// the master on every new connection and drops the pool on a
		// +switch-master, so the retry itself is the refresh.
		r.reload = func() {}
	}
	return r
}

// trigger starts a reload unless one started within the interval.
func (r *refresher) trigger() {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.mu.Unlock()
		return
	}
	r.last = now
	r.mu.Unlock()
	r.reload()
}

// retryBackoff is the pause before retry n (from 0): short first, since a
// redirect or a reload is resolved in a millisecond, capped so a failover
// is noticed soon after the promotion.
func retryBackoff(n int) time.Duration {
	d := 2 * time.Millisecond << min(n, 5)
	return min(d, 50*time.Millisecond)
}

// do runs call, retrying it while its error says it certainly did not run
// and ctx leaves time for another attempt. Every failure refreshes the
// topology; only a certainly-not-run one is retried, unless an open breaker
// refused it.
func (s *Store) do(ctx context.Context, call func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := call(ctx)
		if err == nil {
			return nil
		}
		kind := classify(err)
		if kind == failed {
			return err
		}
		s.refresh.trigger()
		if kind != notRun || s.closed.Load() {
			return err
		}
		wait := retryBackoff(attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
