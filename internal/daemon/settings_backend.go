package daemon

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// backendKind selects the store.
type backendKind uint8

const (
	backendMemory backendKind = iota + 1
	backendRedis
)

func (b backendKind) String() string {
	switch b {
	case backendMemory:
		return "memory"
	case backendRedis:
		return "redis"
	default:
		return "backend(" + strconv.Itoa(int(b)) + ")"
	}
}

// readBackend reads the store settings. BACKEND_TYPE and REDIS_TYPE are
// returned raw: flags may still override the first, and the second is
// parsed only once every variable is known to be valid.
func (s *settings) readBackend(env *envReader) (backend, redisType string) {
	backend = env.oneOf("BACKEND_TYPE", "", "memory", "redis")
	s.RedisURL = env.str("REDIS_URL", "")
	s.RedisSocketType = env.oneOf("REDIS_SOCKET_TYPE", "", "tcp", "unix")
	redisType = env.oneOf("REDIS_TYPE", "SINGLE", "SINGLE", "SENTINEL", "CLUSTER")
	s.RedisAuth = env.str("REDIS_AUTH", "")
	s.RedisTLS = env.boolean("REDIS_TLS", false)
	s.RedisTLSCACert = env.str("REDIS_TLS_CACERT", "")
	s.RedisTLSClientCert = env.str("REDIS_TLS_CLIENT_CERT", "")
	s.RedisTLSClientKey = env.str("REDIS_TLS_CLIENT_KEY", "")
	s.RedisTLSSkipVerifyHost = env.boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)
	s.RedisPoolSize = env.integer("REDIS_POOL_SIZE", redisstore.DefaultPoolSize, 1, 100000)
	s.RedisTimeout = env.duration("REDIS_TIMEOUT", redisstore.DefaultTimeout)
	if s.RedisTimeout == 0 {
		env.fail("REDIS_TIMEOUT", "0s", "a positive duration")
	}
	s.RedisPipelineWindow = env.duration("REDIS_PIPELINE_WINDOW", redisstore.DefaultPipelineWindow)
	s.RedisPipelineLimit = env.integer("REDIS_PIPELINE_LIMIT", 0, 0, math.MaxInt32)
	s.RedisBatchLimit = env.integer("REDIS_BATCH_LIMIT", redisstore.DefaultBatchLimit, 1, 100000)
	s.RedisBreakerThreshold = env.integer("REDIS_BREAKER_THRESHOLD", redisstore.DefaultBreakerThreshold, 0, 1<<20)
	s.RedisBreakerProbeInterval = env.duration("REDIS_BREAKER_PROBE_INTERVAL", redisstore.DefaultBreakerProbeInterval)
	if s.RedisBreakerProbeInterval == 0 {
		env.fail("REDIS_BREAKER_PROBE_INTERVAL", "0s", "a positive duration")
	}
	s.CacheKeyPrefix = env.str("CACHE_KEY_PREFIX", "")
	s.MemoryMaxKeys = env.integer("MEMORY_MAX_KEYS", memstore.DefaultMaxKeys, 0, math.MaxInt32)
	s.LocalCacheBytes = env.integer("LOCAL_CACHE_SIZE_IN_BYTES", 0, 0, math.MaxInt32)
	s.LocalCacheMaxAge = env.duration("LOCAL_CACHE_MAX_AGE", defaultLocalCacheMaxAge)
	return backend, redisType
}

// resolveBackend picks the store once flags are applied, and the socket
// type REDIS_URL implies when REDIS_SOCKET_TYPE is unset.
func (s *settings) resolveBackend(backend string) error {
	var err error
	if s.Backend, err = chooseBackend(backend, s.RedisURL); err != nil {
		return err
	}
	if s.RedisSocketType == "" {
		// envoyproxy defaults to a unix socket; a path is the only URL that
		// can mean one, so infer it instead of failing on host:port URLs.
		s.RedisSocketType = "tcp"
		if strings.HasPrefix(s.RedisURL, "/") {
			s.RedisSocketType = "unix"
		}
	}
	return nil
}

func chooseBackend(name, redisURL string) (backendKind, error) {
	switch strings.ToLower(name) {
	case "memory":
		return backendMemory, nil
	case "redis":
		if redisURL == "" {
			return 0, fmt.Errorf("BACKEND_TYPE=redis needs REDIS_URL (or --redis-url)")
		}
		return backendRedis, nil
	case "":
		if redisURL != "" {
			return backendRedis, nil
		}
		return backendMemory, nil
	default:
		return 0, fmt.Errorf("BACKEND_TYPE (or --backend) %q: want memory or redis", name)
	}
}
