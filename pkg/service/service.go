// Package service embeds ratelimitd's rate-limit service in a Go program:
// Envoy's RateLimitService (envoy.service.ratelimit.v3) with
// envoyproxy/ratelimit's semantics, deciding against any store.Store
// (memstore in this process, redisstore on Redis).
//
// A program loads its rules from envoyproxy-format YAML (ParseRules,
// LoadRules), builds a Service on a store, and either calls ShouldRateLimit
// itself or serves it to Envoy over gRPC (GRPCServerOptions, RegisterGRPC)
// and HTTP (RegisterHTTP). It decides exactly as the ratelimitd daemon does:
// the daemon is built on this package, its settings (environment variables)
// turned into the options here.
package service

import (
	"context"
	"fmt"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Service decides rate-limit requests with its current Rules against a
// store. It is safe for concurrent use.
type Service struct {
	core  *ratelimit.Service
	rules *rulesSource
}

// New returns a Service deciding with rules against st. rules may be nil:
// the Service then answers Unavailable, and reports unhealthy, until
// SetRules gives it some. It fails only when WithMetrics cannot register.
func New(rules *Rules, st store.Store, opts ...Option) (*Service, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	src := &rulesSource{}
	src.rules.Store(rules)
	coreOpts := append([]ratelimit.Option{
		ratelimit.WithKeyBuilder(config.KeyBuilder{Prefix: o.keyPrefix}),
		ratelimit.WithHeaders(ratelimit.Headers(o.headers)),
		ratelimit.WithLogger(o.log),
	}, o.core...)
	if o.registerer != nil {
		m, err := metrics.Register(o.registerer)
		if err != nil {
			return nil, fmt.Errorf("service: metrics: %w", err)
		}
		o.observer = m
	}
	if o.observer != nil {
		coreOpts = append(coreOpts, ratelimit.WithObserver(o.observer))
	}
	var cfg ConfigSource = src
	if o.source != nil {
		cfg = o.source
	}
	return &Service{core: ratelimit.New(coreSource{cfg}, st, coreOpts...), rules: src}, nil
}

// SetRules replaces the rules in force, as the daemon does when its config
// directory changes. Requests already being decided finish with the old
// rules; counters of rules that did not change carry on. A nil rules makes
// the Service answer Unavailable until the next SetRules.
func (s *Service) SetRules(rules *Rules) { s.rules.rules.Store(rules) }

// ShouldRateLimit decides req. Errors carry a gRPC status: InvalidArgument
// for a malformed request, Unavailable when there are no rules or the store
// fails (unless the matched rules' on_store_error decide the request),
// DeadlineExceeded/Canceled when the caller gave up. It never answers
// UNKNOWN, which Envoy would treat as OK.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return s.core.ShouldRateLimit(ctx, req)
}

// GRPCServerOptions are the options the gRPC server given to RegisterGRPC
// must be built with: a codec that checks a request against the caps
// (WithLimits) before decoding it, within the decode budget, and a receive
// limit of the largest request the caps admit.
func (s *Service) GRPCServerOptions() []grpc.ServerOption { return s.core.GRPCServerOptions() }

// RegisterGRPC registers the RateLimitService on srv, which must be built
// with GRPCServerOptions.
func (s *Service) RegisterGRPC(srv *grpc.Server) { s.core.RegisterGRPC(srv) }

// RegisterHTTP adds /healthcheck and /json to mux, as envoyproxy serves
// them.
func (s *Service) RegisterHTTP(mux *http.ServeMux) { s.core.RegisterHTTP(mux) }

// HealthHandler answers 200 "OK" while Healthy, 500 otherwise.
func (s *Service) HealthHandler() http.Handler { return s.core.HealthHandler() }

// JSONHandler serves POST /json: a protojson RateLimitRequest in, a
// protojson RateLimitResponse out, with 200 for OK and 429 for OVER_LIMIT.
func (s *Service) JSONHandler() http.Handler { return s.core.JSONHandler() }

// Healthy reports whether the Service is serving with rules.
func (s *Service) Healthy() bool { return s.core.Healthy() }

// Admission reports the decisions in progress, the calls refused past
// WithAdmission's cap and the decisions its timeout ended.
func (s *Service) Admission() (inFlight int64, rejected, timedOut uint64) { return s.core.Admission() }

// SetServing flips what /healthcheck reports; clear it when the program
// starts shutting down, so that load balancers stop sending requests.
func (s *Service) SetServing(serving bool) { s.core.SetServing(serving) }

// RecoverUnary turns a panic in a unary gRPC handler into codes.Internal, so
// that a bug fails one call instead of the process every Envoy depends on.
// ratelimitd installs it on its gRPC server.
func RecoverUnary(log *zap.Logger) grpc.UnaryServerInterceptor { return ratelimit.RecoverUnary(log) }
