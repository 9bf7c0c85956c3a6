package ratelimit

import (
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// Default request caps. Envoy sends a handful of short descriptors; the caps
// only stop a misbehaving client from making one call cost a huge Lua run.
const (
	DefaultMaxDescriptors = 64
	DefaultMaxEntries     = 32
	DefaultMaxValueLen    = 1024
)

// Option configures a Service.
type Option func(*Service)

// WithKeyBuilder sets how store keys are built (CACHE_KEY_PREFIX).
func WithKeyBuilder(b config.KeyBuilder) Option {
	return func(s *Service) { s.keys = b }
}

// WithLimits caps descriptors per request, entries per descriptor and the
// length in bytes of the domain and of each entry key and value. A value of
// zero or less keeps the default.
func WithLimits(maxDescriptors, maxEntries, maxValueLen int) Option {
	return func(s *Service) {
		if maxDescriptors > 0 {
			s.caps.descriptors = maxDescriptors
		}
		if maxEntries > 0 {
			s.caps.entries = maxEntries
		}
		if maxValueLen > 0 {
			s.caps.valueLen = maxValueLen
		}
	}
}

// WithShadowMode is envoyproxy's global SHADOW_MODE: descriptors are decided
// and counted as usual, but the overall code is always OK.
func WithShadowMode(on bool) Option {
	return func(s *Service) { s.globalShadow = on }
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(s *Service) {
		if l != nil {
			s.log = l
		}
	}
}

// WithHeaders sets the HTTP headers added to responses
// (LIMIT_RESPONSE_HEADERS_ENABLED and ratelimitd's draft and Retry-After
// headers).
func WithHeaders(h Headers) Option {
	return func(s *Service) { s.headers = h }
}

// WithHealthyNeedsDomain is envoyproxy's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED:
// the service reports unhealthy until the config in force has a domain.
func WithHealthyNeedsDomain(on bool) Option {
	return func(s *Service) { s.healthyNeedsDomain = on }
}

// WithDynamicMetadata is envoyproxy's RESPONSE_DYNAMIC_METADATA: responses
// carry the request and the matched rules' metadata in dynamic_metadata.
func WithDynamicMetadata(on bool) Option {
	return func(s *Service) { s.dynamicMetadata = on }
}

// WithQuotaMode is envoyproxy's QUOTA_MODE: every rule is a quota rule, so a
// request is over the limit only when all its counted descriptors are.
func WithQuotaMode(on bool) Option {
	return func(s *Service) { s.globalQuota = on }
}

// WithDecodeBudget bounds the bytes of requests being decoded at once, over
// gRPC and /json together (MAX_DECODING_BYTES); n <= 0 keeps
// DefaultDecodeBudget. A request waits for room rather than fail, so the
// budget bounds memory under a flood of large requests without refusing a
// burst of ordinary ones.
func WithDecodeBudget(n int64) Option {
	return func(s *Service) {
		if n > 0 {
			s.decode = newByteBudget(n)
		}
	}
}

// WithLease is ratelimitd's LEASE_ENABLED: the rules that do not say
// lease themselves (all rules from xDS, which has no such field) let the
// store lease blocks of their counters (store.Request.Lease, read by
// pkg/store/lease), where their limit can lease. Shadow, quota and usage
// ops never carry Lease, whatever the rule says; refunds do, so that the
// lease store sees them on their way to the backend.
func WithLease(on bool) Option {
	return func(s *Service) { s.globalLease = on }
}

// WithClock sets where the service reads the time of what it follows over
// requests (when a rule deciding locally is back on the store); the
// default is time.Now. Tests pass a fake clock.
func WithClock(now func() time.Time) Option {
	return func(s *Service) {
		if now != nil {
			s.now = now
		}
	}
}
