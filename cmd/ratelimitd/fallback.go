package main

import (
	"context"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// withFallback puts the on_store_error: local decorator (pkg/store/fallback)
// over the Redis store's stack, outermost, so that what the local cache
// and leases answer without Redis still comes from them. Replicas learn of
// each other through the Redis store's presence; the embedded store has no
// outage to bridge and gets none.
func (a *app) withFallback(st store.Store, m *metrics.Metrics) (store.Store, *fallback.Store, error) {
	set := a.set
	rs, ok := under[*redisstore.Store](st)
	if set.Backend != backendRedis || !ok {
		return st, nil, nil
	}
	keys := config.KeyBuilder{Prefix: set.CacheKeyPrefix}
	rule := func(key string) (string, string) { return a.watcher.Current().RuleOfKey(keys, key) }
	fb := fallback.New(st,
		fallback.WithReplicas(set.Fallback.Replicas),
		fallback.WithPresence(redisPresence{rs.Presence(keys.PresenceKey(), 3*set.Fallback.Heartbeat)}, set.Fallback.Heartbeat),
		fallback.WithUncharged(redisstore.NotRun),
		fallback.WithReconciled(func(key string, hits uint64) {
			domain, r := rule(key)
			m.LocalReconciled(domain, r, hits)
		}),
		fallback.WithDropped(func(key string, hits uint64) {
			domain, r := rule(key)
			m.LocalDropped(domain, r, hits)
		}),
	)
	if err := m.AddFallback(fb); err != nil {
		return st, nil, err // st is still the app's to close
	}
	return fb, fb, nil
}

// redisPresence is the Redis store's presence as the decorator reads it.
type redisPresence struct{ *redisstore.Presence }

func (p redisPresence) Beat(ctx context.Context, id string, local bool) (fallback.Members, error) {
	b, err := p.Presence.Beat(ctx, id, local)
	return fallback.Members(b), err
}

// startFallback starts the replicas' presence once a config in force has a
// local rule, so that the others count this replica before it decides a
// single request locally.
func (a *app) startFallback(cfg *config.Config) {
	if a.fallback != nil && cfg.LocalFallback() {
		a.fallback.Start()
	}
}

// under finds the store of type T in st's decorator chain.
func under[T store.Store](st store.Store) (T, bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, true
		}
		u, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	var zero T
	return zero, false
}
