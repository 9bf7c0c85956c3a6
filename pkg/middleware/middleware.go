// Package middleware limits a Go service's own requests with ratelimitd's
// rules: net/http middleware (Handler) and gRPC server interceptors (unary
// and stream), with per-route rules (Config: a ServeMux pattern or a gRPC
// method, to Envoy-style rate_limits) given in code or in a routes file
// (Parse, Load).
//
// They decide with a client.Limiter, on either backend: a ratelimitd over
// gRPC (client.Dial) or the service embedded in this process
// (service.New on memstore or redisstore). A denied request gets 429 Too
// Many Requests, or RESOURCE_EXHAUSTED, with exactly the headers the service
// computed (RateLimit-Limit/Remaining/Reset, RateLimit-Policy and RateLimit,
// Retry-After, as its settings enable them); an admitted one gets them on
// its response, as Envoy adds them. docs/go.md is the guide.
package middleware

import (
	"context"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ratelimitd/ratelimitd/pkg/client"
)

// What a request the backend could not decide is told: never the backend's
// error, which may name its addresses or its internals.
const (
	msgUnavailable = "rate limit unavailable"
	msgInvalid     = "rate limit: invalid request"
)

// Middleware limits the requests of its Config's routes. It is safe for
// concurrent use; its handlers and interceptors may be installed on several
// servers.
type Middleware struct {
	limiter *client.Limiter
	routes  *routes
	builder client.Builder
	onError func(ctx context.Context, err error)
	// log samples the backend's errors (WithLogger).
	log *zap.Logger
}

// Option configures a Middleware.
type Option func(*Middleware)

// WithTrustedHops trusts n proxies in front of the service for the
// remote_address action (client.Builder.TrustedHops, Envoy's
// xff_num_trusted_hops); the default, 0, uses the connection's peer.
func WithTrustedHops(n int) Option {
	return func(m *Middleware) { m.builder.TrustedHops = n }
}

// WithErrorHandler is called with the backend's error each time it could
// not decide, whatever the Limiter's OnError then answered (a fail-open
// request passes silently otherwise): log or count it there.
func WithErrorHandler(f func(ctx context.Context, err error)) Option {
	return func(m *Middleware) { m.onError = f }
}

// WithLogger logs the backend's errors (warn, at most one a second), which
// a caller is never shown; the default logs nothing.
func WithLogger(l *zap.Logger) Option {
	return func(m *Middleware) {
		if l != nil {
			m.log = l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
				return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
			}))
		}
	}
}

// New returns a Middleware deciding cfg's routes with l. It fails with
// every error of cfg (see Config.Validate).
func New(l *client.Limiter, cfg Config, opts ...Option) (*Middleware, error) {
	r, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	m := &Middleware{limiter: l, routes: r, log: zap.NewNop()}
	for _, opt := range opts {
		opt(m)
	}
	return m, nil
}

// decide asks the limiter about one request's descriptors.
func (m *Middleware) decide(ctx context.Context, req *rlsv3.RateLimitRequest) client.Decision {
	d := m.limiter.Decide(ctx, req)
	if d.Err == nil {
		return d
	}
	m.log.Warn("rate limit backend failed", zap.String("domain", req.GetDomain()), zap.Error(d.Err))
	if m.onError != nil {
		m.onError(ctx, d.Err)
	}
	return d
}
