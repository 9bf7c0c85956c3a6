package service

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

// The daemon's defaults, which the options below keep for a value of zero.
const (
	DefaultMaxDescriptors = ratelimit.DefaultMaxDescriptors
	DefaultMaxEntries     = ratelimit.DefaultMaxEntries
	DefaultMaxValueLen    = ratelimit.DefaultMaxValueLen
	DefaultDecodeBudget   = ratelimit.DefaultDecodeBudget
)

// Header names Headers.Classic uses where its own are empty, as envoyproxy
// names them.
const (
	DefaultLimitHeader     = ratelimit.DefaultLimitHeader
	DefaultRemainingHeader = ratelimit.DefaultRemainingHeader
	DefaultResetHeader     = ratelimit.DefaultResetHeader
)

// Option configures a Service. Each is one of the daemon's settings; the
// setting's name (README.md, "Settings") is given where there is one.
type Option func(*options)

type options struct {
	keyPrefix  string
	headers    Headers
	log        *zap.Logger
	registerer prometheus.Registerer
	observer   ratelimit.Observer
	source     ConfigSource
	// core are the options passed through as they are.
	core []ratelimit.Option
}

// Headers chooses the HTTP headers the Service asks Envoy to add to the
// response. The zero value adds none.
//
// It has the daemon's own type's fields, in order: New converts one into
// the other, so the two cannot drift apart without the build failing.
type Headers struct {
	// Classic adds envoyproxy's headers (LIMIT_RESPONSE_HEADERS_ENABLED),
	// named by Limit, Remaining and Reset; an empty name keeps envoyproxy's
	// (RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset).
	Classic                 bool
	Limit, Remaining, Reset string
	// Draft adds the IETF structured fields RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers).
	Draft bool
	// RetryAfter adds Retry-After (whole seconds) to an OVER_LIMIT answer.
	RetryAfter bool
	// Request adds the same three values as Classic to the request Envoy
	// forwards upstream (LIMIT_REQUEST_HEADERS_ENABLED), named by
	// RequestLimit, RequestRemaining and RequestReset; an empty name keeps
	// envoyproxy's.
	Request                                      bool
	RequestLimit, RequestRemaining, RequestReset string
	// AllLimits adds ratelimit-limit-<unit>s and ratelimit-remaining-<unit>s
	// for every counted limit (LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED).
	AllLimits bool
}

// WithHeaders sets the HTTP headers added to responses.
func WithHeaders(h Headers) Option {
	return func(o *options) { o.headers = h }
}

// WithKeyPrefix starts every store key with prefix (CACHE_KEY_PREFIX), so
// that several services, or several rule sets, can share one Redis.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) { o.keyPrefix = prefix }
}

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithMetrics registers the daemon's per-rule and latency metrics
// (ratelimitd_*, docs/operations.md) on reg, for the program to serve with
// its own; New fails if they are registered there already (the daemon
// hands the registry of its own metrics, which are then used). Metrics that
// only the daemon's stores and servers feed stay at zero.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer, o.observer = reg, nil }
}

// WithLimits caps descriptors per request (MAX_DESCRIPTORS), entries per
// descriptor (MAX_DESCRIPTOR_ENTRIES) and the length in bytes of the domain
// and of each entry key and value (MAX_VALUE_LENGTH). A value of
// zero or less keeps the daemon's default.
func WithLimits(maxDescriptors, maxEntries, maxValueLen int) Option {
	return passThrough(ratelimit.WithLimits(maxDescriptors, maxEntries, maxValueLen))
}

// WithDecodeBudget bounds the bytes of requests being decoded at once, over
// gRPC and /json together (MAX_DECODING_BYTES); n <= 0 keeps the daemon's
// default. A request waits for room rather than fail.
func WithDecodeBudget(n int64) Option {
	return passThrough(ratelimit.WithDecodeBudget(n))
}

// WithShadowMode is SHADOW_MODE: descriptors are decided and counted as
// usual, but the overall code is always OK.
func WithShadowMode(on bool) Option {
	return passThrough(ratelimit.WithShadowMode(on))
}

// WithQuotaMode is QUOTA_MODE: every rule is a quota rule, so a request is
// over the limit only when all its counted descriptors are.
func WithQuotaMode(on bool) Option {
	return passThrough(ratelimit.WithQuotaMode(on))
}

// WithAdmission is MAX_CONCURRENT_REQUESTS and REQUEST_TIMEOUT: past
// maxConcurrent decisions in progress a call is refused at once with
// RESOURCE_EXHAUSTED (an ErrorInfo reason OVERLOADED says why), and a
// decision still waiting for the store timeout after it began is answered
// UNAVAILABLE (or from its rules' on_store_error). Zero leaves either
// unbounded.
func WithAdmission(maxConcurrent int, timeout time.Duration) Option {
	return passThrough(ratelimit.WithAdmission(maxConcurrent, timeout))
}

// WithQuotaGroups is QUOTA_GROUP_BY_BACKEND: quota descriptors naming the
// same backend_name and model_name_override are one quota group, over
// when any of them is; a request is over only when every group is, and
// with WithDynamicMetadata the response lists the backends left
// (passedBackends), for Envoy AI Gateway's failover.
func WithQuotaGroups(on bool) Option {
	return passThrough(ratelimit.WithQuotaGroups(on))
}

// WithDynamicMetadata is RESPONSE_DYNAMIC_METADATA: responses carry the
// request and the matched rules' metadata in dynamic_metadata.
func WithDynamicMetadata(on bool) Option {
	return passThrough(ratelimit.WithDynamicMetadata(on))
}

// WithHealthyNeedsDomain is HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: the
// Service reports unhealthy until its rules have a domain.
func WithHealthyNeedsDomain(on bool) Option {
	return passThrough(ratelimit.WithHealthyNeedsDomain(on))
}

// WithLease is LEASE_ENABLED: rules that do not say lease themselves let a
// store wrapped in pkg/store/lease lease blocks of their counters
// (docs/leases.md). Without that wrapper it changes nothing.
func WithLease(on bool) Option {
	return passThrough(ratelimit.WithLease(on))
}

func passThrough(opt ratelimit.Option) Option {
	return func(o *options) { o.core = append(o.core, opt) }
}
