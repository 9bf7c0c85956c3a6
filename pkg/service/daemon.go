package service

import (
	"context"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

// The ratelimitd daemon (internal/daemon) is built on this package: what it
// needs beyond the options a Go program uses is here. These name the
// module's internal types, so only the daemon can call them; a Go program
// has SetRules and WithMetrics instead.

// ConfigSource yields the config in force on every request: the daemon's
// config-directory watcher or xDS source, whose reloads then need no
// SetRules. Current returns nil while no config is loaded.
type ConfigSource interface {
	Current() *config.Config
}

// WithConfigSource decides every request with src's current config instead
// of the Rules given to New and SetRules, which then change nothing.
func WithConfigSource(src ConfigSource) Option {
	return func(o *options) { o.source = src }
}

// WithObserver sends per-rule counts, latencies and store errors to obs,
// the daemon's metrics; it replaces WithMetrics, and WithMetrics replaces
// it.
func WithObserver(obs ratelimit.Observer) Option {
	return func(o *options) { o.observer, o.registerer = obs, nil }
}

// Counters resolves descriptors of domain exactly as ShouldRateLimit does,
// asking the store nothing: the keys of the daemon's counters API
// (internal/admin) resets. Errors carry a gRPC status.
func (s *Service) Counters(domain string, descriptors [][]config.Entry) ([]ratelimit.Counter, error) {
	return s.core.Counters(domain, descriptors)
}

// Inspect is Counters plus a check (zero hits) of every counted
// descriptor in one store call: what ShouldRateLimit would see now, charging
// nothing.
func (s *Service) Inspect(ctx context.Context, domain string, descriptors [][]config.Entry) ([]ratelimit.Counter, error) {
	return s.core.Inspect(ctx, domain, descriptors)
}
