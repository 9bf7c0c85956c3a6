// Package admin serves ratelimitd.admin.v1.Counters, the counters API:
// read a rule's counter without charging it (Get), give its quota back
// (Reset) and list a domain's counters (List), over gRPC and as JSON on the
// debug port. Every call must present the admin credential (Auth); without
// one configured the API is not served at all.
package admin

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// counterSource resolves descriptors as ShouldRateLimit does;
// *service.Service is one.
type counterSource interface {
	Counters(domain string, descriptors [][]service.Entry) ([]service.Counter, error)
	Inspect(ctx context.Context, domain string, descriptors [][]service.Entry) ([]service.Counter, error)
}

// Defaults of List.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// DefaultListBudget bounds one List call's scanning: a page ends early
	// (with a next_page_token) rather than hold a caller, or Redis, longer.
	DefaultListBudget = time.Second
	// maxDomainLen bounds a List domain as MAX_VALUE_LENGTH's default
	// bounds the others (Get and Reset use the service's caps).
	maxDomainLen = 1024
)

// Server implements adminv1.CountersServer.
type Server struct {
	adminv1.UnimplementedCountersServer

	counters counterSource
	backend  store.Admin
	keys     config.KeyBuilder
	auth     Auth
	// forget drops reset keys from this replica's local cache, if any.
	forget     func(keys ...string)
	listBudget time.Duration
	log        *zap.Logger
	// denyLog logs refused calls at most once a second.
	denyLog *zap.Logger
	metrics *metrics
}

var _ adminv1.CountersServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithKeyBuilder must be the service's (CACHE_KEY_PREFIX), so that List
// finds its keys.
func WithKeyBuilder(b config.KeyBuilder) Option { return func(s *Server) { s.keys = b } }

// WithLogger sets where resets and refused calls are logged.
func WithLogger(l *zap.Logger) Option {
	return func(s *Server) {
		if l != nil {
			s.log = l
		}
	}
}

// WithListBudget bounds one List call; d <= 0 keeps DefaultListBudget.
func WithListBudget(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.listBudget = d
		}
	}
}

// New serves the counters of src (the service, for matching and keys) held
// in backend, to callers presenting auth. A backend that remembers keys
// (store.Forgetter: a local cache, leases) forgets them before and after
// each reset deletes them.
func New(src counterSource, backend store.Admin, auth Auth, opts ...Option) *Server {
	s := &Server{
		counters:   src,
		backend:    backend,
		auth:       auth,
		forget:     func(...string) {},
		listBudget: DefaultListBudget,
		log:        zap.NewNop(),
		metrics:    newMetrics(),
	}
	if f, ok := backend.(store.Forgetter); ok {
		s.forget = f.Forget
	}
	for _, opt := range opts {
		opt(s)
	}
	s.denyLog = s.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	return s
}
