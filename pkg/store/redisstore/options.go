package redisstore

import (
	"crypto/tls"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
)

// Type is the Redis deployment REDIS_TYPE names; the client New builds
// (pkg/redisconn) takes it as it is.
type Type = redisconn.Type

const (
	// Single is one Redis server (REDIS_TYPE=SINGLE, the default).
	Single = redisconn.Single
	// Sentinel is a master found through Sentinel (REDIS_TYPE=SENTINEL).
	Sentinel = redisconn.Sentinel
	// Cluster is Redis Cluster (REDIS_TYPE=CLUSTER).
	Cluster = redisconn.Cluster
)

// ParseType maps a REDIS_TYPE value (case-insensitive) to a Type.
func ParseType(s string) (Type, error) { return redisconn.ParseType(s) }

// DefaultTimeout is REDIS_TIMEOUT's default in envoyproxy/ratelimit.
const DefaultTimeout = redisconn.DefaultTimeout

// DefaultPoolSize is REDIS_POOL_SIZE's default in envoyproxy/ratelimit.
const DefaultPoolSize = redisconn.DefaultPoolSize

// Option configures New.
type Option func(*settings)

type settings struct {
	client redis.UniversalClient
	// conn is how the client the store builds reaches Redis (WithAddr,
	// WithType, WithSocketType, WithAuth, WithTLS, WithPoolSize,
	// WithTimeout) and its breakers (WithBreaker, WithBreakerSet); its
	// Timeout also bounds every call.
	conn    redisconn.Config
	now     func() time.Time
	observe func(time.Duration, error)

	// REDIS_PIPELINE_WINDOW and REDIS_PIPELINE_LIMIT (pipeline.go).
	pipelineWindow time.Duration
	pipelineLimit  int
	// REDIS_BATCH_LIMIT: most takes in one script call (merge.go).
	batchLimit int
	undoFailed func(charges int, err error)

	refreshInterval time.Duration

	// The notices (refunds.go): WithKeyPrefix, WithNoticeFailure.
	channel      string
	noticeFailed func(op string, err error)
}

// WithUndoFailure is told when the undo of a denied cross-slot request
// failed (a shard died mid-request): the charged counters stay charged until
// their window passes or their bucket refills. The request is still
// answered as decided (OVER_LIMIT). For logging and a metric.
func WithUndoFailure(fn func(charges int, err error)) Option {
	return func(s *settings) { s.undoFailed = fn }
}

// DefaultRefreshInterval is the least time between two topology refreshes
// (Cluster slot map reloads) that failing calls trigger.
const DefaultRefreshInterval = 100 * time.Millisecond

// WithRoundTripObserver is told how long each script call took and whether
// it failed (the metrics' Redis round-trip histogram).
func WithRoundTripObserver(fn func(took time.Duration, err error)) Option {
	return func(s *settings) { s.observe = fn }
}

func defaults() settings {
	return settings{conn: redisconn.Defaults(),
		pipelineWindow: DefaultPipelineWindow, batchLimit: DefaultBatchLimit, refreshInterval: DefaultRefreshInterval, channel: RefundChannel("")}
}

// WithClient uses c instead of building a client. The options that build
// one (WithAddr, WithType, WithSocketType, WithAuth, WithTLS, WithPoolSize)
// are then ignored, and so are WithPipeline and WithBreaker (their hooks go
// into a client the store built, never into the caller's). WithTimeout,
// WithClock, WithRoundTripObserver and WithUndoFailure still apply. The
// caller keeps ownership: Close does not close c.
func WithClient(c redis.UniversalClient) Option {
	return func(s *settings) { s.client = c }
}

// WithAddr is REDIS_URL: "host:port", "redis://..." or "rediss://..." (or a
// socket path with WithSocketType("unix")); for Sentinel
// "mastername,host:port,host:port" (the sentinels); for Cluster a
// comma-separated list of seed nodes.
func WithAddr(url string) Option {
	return func(s *settings) { s.conn.Addr = url }
}

// WithType is REDIS_TYPE.
func WithType(t Type) Option {
	return func(s *settings) { s.conn.Type = t }
}

// WithSocketType is REDIS_SOCKET_TYPE: "tcp" (default) or "unix".
func WithSocketType(network string) Option {
	return func(s *settings) { s.conn.SocketType = network }
}

// WithAuth is REDIS_AUTH: "password", or "user:password" for an ACL user.
// It wins over credentials in a redis:// URL.
func WithAuth(auth string) Option {
	return func(s *settings) { s.conn.Auth = auth }
}

// WithTLS enables TLS (REDIS_TLS) with cfg; a rediss:// URL enables it too.
func WithTLS(cfg *tls.Config) Option {
	return func(s *settings) { s.conn.TLS = cfg }
}

// WithPoolSize is REDIS_POOL_SIZE, connections per node.
func WithPoolSize(n int) Option {
	return func(s *settings) { s.conn.PoolSize = n }
}

// WithTimeout is REDIS_TIMEOUT: the dial, read and write timeout, and an
// upper bound on every Take and Ping whatever the caller's deadline.
func WithTimeout(d time.Duration) Option {
	return func(s *settings) { s.conn.Timeout = d }
}

// WithClock passes now() to the script as the decision time. Tests only: in
// production every replica must share Redis's clock (TIME), which is the default.
func WithClock(now func() time.Time) Option {
	return func(s *settings) { s.now = now }
}
