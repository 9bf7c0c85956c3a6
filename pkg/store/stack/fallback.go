package stack

import (
	"context"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// fallbackConfig is WithFallback's.
type fallbackConfig struct {
	on          bool
	presenceKey string
	heartbeat   time.Duration
	opts        []fallback.Option
}

// WithFallback puts the on_store_error: local decorator (pkg/store/fallback)
// over the cache, on Redis only (the embedded store has no outage to
// bridge): while Redis cannot decide, a batch with a FallbackLocal request
// is decided in memory with this replica's share of each limit. Replicas
// learn of each other through the Redis store's presence under presenceKey
// (config.KeyBuilder.PresenceKey), beating every heartbeat
// (fallback.DefaultHeartbeat if <= 0; live for three); errors are
// classified by redisstore.NotRun. opts come after those.
func WithFallback(presenceKey string, heartbeat time.Duration, opts ...fallback.Option) Option {
	return func(c *config) {
		c.fallback = fallbackConfig{on: true, presenceKey: presenceKey, heartbeat: heartbeat, opts: opts}
	}
}

// newFallback wraps the stack built so far in the decorator.
func (s *Stack) newFallback(c fallbackConfig) {
	hb := c.heartbeat
	if hb <= 0 {
		hb = fallback.DefaultHeartbeat
	}
	opts := append([]fallback.Option{
		fallback.WithPresence(redisPresence{s.Redis.Presence(c.presenceKey, 3*hb)}, hb),
		fallback.WithUncharged(redisstore.NotRun),
	}, c.opts...)
	s.Fallback = fallback.New(s.Store, opts...)
	s.Store = s.Fallback
}

// redisPresence is the Redis store's presence as the decorator reads it.
type redisPresence struct{ *redisstore.Presence }

func (p redisPresence) Beat(ctx context.Context, id string, local bool) (fallback.Members, error) {
	b, err := p.Presence.Beat(ctx, id, local)
	return fallback.Members(b), err
}
