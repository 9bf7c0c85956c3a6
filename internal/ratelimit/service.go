// Package ratelimit serves Envoy's RateLimitService (envoy.service.ratelimit.v3)
// with envoyproxy/ratelimit's semantics, except that a request is decided
// all-or-nothing: every counted descriptor goes to the store in one Take, and
// a denied request consumes nothing.
//
// It is the daemon's: its API names the daemon's own types (the config
// watcher's *config.Config, metrics.Hit, the counters API's Counter).
// pkg/service is the narrow public front on it for Go programs.
package ratelimit

import (
	"context"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// ConfigSource yields the config to decide with; *config.Watcher is one.
// Current returns nil while no config has been loaded.
type ConfigSource interface {
	Current() *config.Config
}

// Service implements rlsv3.RateLimitServiceServer plus the HTTP endpoints
// (/healthcheck, /json) envoyproxy serves next to it.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg          ConfigSource
	store        store.Store
	keys         config.KeyBuilder
	caps         caps
	globalShadow bool
	headers      Headers
	// healthyNeedsDomain: see WithHealthyNeedsDomain.
	healthyNeedsDomain bool
	// obs receives metrics; nil when none are collected.
	obs Observer
	// dynamicMetadata and globalQuota: see WithDynamicMetadata, WithQuotaMode.
	dynamicMetadata bool
	globalQuota     bool
	// quotaGroups: see WithQuotaGroups.
	quotaGroups bool
	// globalLease: see WithLease.
	globalLease bool
	log         *zap.Logger
	// errLog logs each message at most once a second: when the backend is
	// down every request fails the same way, and one line per request would
	// bury everything else.
	errLog   *zap.Logger
	draining atomic.Bool
	// decode bounds the bytes of requests being decoded at once (gRPC and
	// /json); see WithDecodeBudget.
	decode *byteBudget
	// admission: see WithAdmission (unbounded by default).
	admission *admission
	// local: the rules deciding locally now (local.go), on the clock now.
	local localRules
	now   func() time.Time
	// grpcInfo and grpcHandle: see grpcUnary.
	grpcInfo   *grpc.UnaryServerInfo
	grpcHandle grpc.UnaryHandler
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// New returns a Service deciding with cfg's current config against st.
func New(cfg ConfigSource, st store.Store, opts ...Option) *Service {
	s := &Service{
		cfg:   cfg,
		store: st,
		caps: caps{
			descriptors: DefaultMaxDescriptors,
			entries:     DefaultMaxEntries,
			valueLen:    DefaultMaxValueLen,
		},
		log:       zap.NewNop(),
		decode:    newByteBudget(DefaultDecodeBudget),
		admission: newAdmission(0, 0),
		now:       time.Now,
	}
	for _, opt := range opts {
		opt(s)
	}
	s.grpcUnary()
	s.errLog = s.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	return s
}

// ShouldRateLimit decides req. Errors carry a gRPC status: InvalidArgument
// for a malformed request, Unavailable when there is no config or the
// backend fails (unless the matched rules' on_store_error decide the
// request) or REQUEST_TIMEOUT passes, ResourceExhausted past
// MAX_CONCURRENT_REQUESTS, DeadlineExceeded/Canceled when the caller gave
// up. It never answers UNKNOWN, which Envoy would treat as OK.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.obs == nil {
		return s.admitted(ctx, req)
	}
	start := time.Now()
	resp, err := s.admitted(ctx, req)
	s.obs.Request(status.Code(err).String(), time.Since(start))
	return resp, err
}

// admitted decides req within WithAdmission's bounds: RESOURCE_EXHAUSTED at
// once past MAX_CONCURRENT_REQUESTS.
func (s *Service) admitted(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel, err := s.admission.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer s.admission.release(cancel)
	return s.shouldRateLimit(ctx, req)
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.caps.validate(req); err != nil {
		s.serviceError()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cfg := s.cfg.Current()
	if cfg == nil {
		s.serviceError()
		return nil, status.Error(codes.Unavailable, "no rate limit configuration loaded")
	}
	p, err := s.plan(cfg, req)
	if err != nil {
		s.serviceError()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	results, err := s.take(ctx, p)
	if err != nil {
		if resp, ok := s.answerStoreError(ctx, req, p, err); ok {
			return resp, nil
		}
		return nil, s.backendError(ctx, err)
	}
	resp := s.respond(p, results)
	s.addHeaders(p, results, resp)
	s.addDynamicMetadata(req, p, resp)
	s.observe(cfg, req.GetDomain(), p, results)
	s.noteLocal(p, results)
	if ce := s.log.Check(zapcore.DebugLevel, "decided"); ce != nil {
		ce.Write(zap.String("domain", req.GetDomain()), zap.Int("descriptors", len(p.slots)),
			zap.Int("counted", len(p.reqs)), zap.Stringer("overall", resp.GetOverallCode()))
	}
	return resp, nil
}
