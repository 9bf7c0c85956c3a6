package redisconn

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"
)

// Type is the Redis deployment REDIS_TYPE names.
type Type uint8

const (
	// Single is one Redis server (REDIS_TYPE=SINGLE, the default).
	Single Type = iota + 1
	// Sentinel is a master found through Sentinel (REDIS_TYPE=SENTINEL).
	Sentinel
	// Cluster is Redis Cluster (REDIS_TYPE=CLUSTER).
	Cluster
)

func (t Type) String() string {
	switch t {
	case Single:
		return "SINGLE"
	case Sentinel:
		return "SENTINEL"
	case Cluster:
		return "CLUSTER"
	default:
		return fmt.Sprintf("Type(%d)", uint8(t))
	}
}

// ParseType maps a REDIS_TYPE value (case-insensitive) to a Type.
func ParseType(s string) (Type, error) {
	for _, t := range []Type{Single, Sentinel, Cluster} {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("redisconn: unknown redis type %q (want SINGLE, SENTINEL or CLUSTER)", s)
}

// DefaultTimeout is REDIS_TIMEOUT's default in envoyproxy/ratelimit.
const DefaultTimeout = 10 * time.Second

// DefaultPoolSize is REDIS_POOL_SIZE's default in envoyproxy/ratelimit.
const DefaultPoolSize = 10

// Config is one way to reach Redis. Defaults gives envoyproxy's defaults.
type Config struct {
	// Addr is REDIS_URL: "host:port", "redis://..." or "rediss://..." (or a
	// socket path with SocketType "unix"); for Sentinel
	// "mastername,host:port,host:port" (the sentinels); for Cluster a
	// comma-separated list of seed nodes.
	Addr string
	Type Type
	// SocketType is REDIS_SOCKET_TYPE: "tcp" or "unix".
	SocketType string
	// Auth is REDIS_AUTH: "password", or "user:password" for an ACL user.
	// It wins over credentials in a redis:// URL.
	Auth string
	// TLS enables TLS (REDIS_TLS) when not nil; a rediss:// URL enables it
	// too.
	TLS *tls.Config
	// PoolSize is REDIS_POOL_SIZE, connections per node.
	PoolSize int
	// Timeout is REDIS_TIMEOUT: the dial, read, write and pool timeout.
	Timeout time.Duration

	// BreakerThreshold is REDIS_BREAKER_THRESHOLD: after this many
	// consecutive calls to one node failed in a way that certainly ran
	// nothing (dial refused, CLUSTERDOWN, LOADING, MASTERDOWN), calls to that
	// node fail at once with ErrBreakerOpen. 0 builds no breakers.
	BreakerThreshold int
	// BreakerProbeInterval is REDIS_BREAKER_PROBE_INTERVAL: while a node's
	// breaker is open, a PING every interval closes it once the node
	// answers; 0 or less means DefaultBreakerProbeInterval.
	BreakerProbeInterval time.Duration
	// Breakers, when not nil, gathers the client's breakers for metrics.
	Breakers *BreakerSet
	// OnBreakerChange, when not nil, is told once each time a node's
	// breaker opens (open true) or a probe closes it, for a log line.
	OnBreakerChange func(node string, open bool)
}

// Defaults is a single server over TCP with envoyproxy's pool size and
// timeout, and ratelimitd's breakers; Addr is left to the caller.
func Defaults() Config {
	return Config{Type: Single, SocketType: "tcp", PoolSize: DefaultPoolSize, Timeout: DefaultTimeout,
		BreakerThreshold: DefaultBreakerThreshold, BreakerProbeInterval: DefaultBreakerProbeInterval}
}
