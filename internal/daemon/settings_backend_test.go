package daemon

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// backendSettingsTests are TestParseSettings's cases of the store's
// settings: the backend, Redis's connection, TLS and pipeline.
var backendSettingsTests = []struct {
	name string
	env  map[string]string
	args []string
	want func(*settings)
}{
	{
		name: "REDIS_URL selects redis",
		env: map[string]string{"REDIS_URL": "redis:6379", "REDIS_TYPE": "cluster", "REDIS_AUTH": "u:p", "REDIS_TLS": "true",
			"REDIS_POOL_SIZE": "32", "REDIS_TIMEOUT": "250ms", "CACHE_KEY_PREFIX": "rl_"},
		want: func(s *settings) {
			s.Backend, s.RedisURL, s.RedisType, s.RedisAuth, s.RedisTLS = backendRedis, "redis:6379", redisstore.Cluster, "u:p", true
			s.RedisPoolSize, s.RedisTimeout, s.CacheKeyPrefix = 32, 250*time.Millisecond, "rl_"
		},
	},
	{
		name: "pipeline settings",
		env:  map[string]string{"REDIS_PIPELINE_WINDOW": "0", "REDIS_PIPELINE_LIMIT": "8"},
		want: func(s *settings) { s.RedisPipelineWindow, s.RedisPipelineLimit = 0, 8 },
	},
	{
		name: "breaker settings",
		env:  map[string]string{"REDIS_BREAKER_THRESHOLD": "0", "REDIS_BREAKER_PROBE_INTERVAL": "250ms"},
		want: func(s *settings) { s.RedisBreakerThreshold, s.RedisBreakerProbeInterval = 0, 250*time.Millisecond },
	},
	{
		name: "port 0 everywhere and a ready file",
		env:  map[string]string{"PORT": "0", "GRPC_PORT": "0", "DEBUG_PORT": "0"},
		args: []string{"--ready-file", "/run/ready.json"},
		want: func(s *settings) {
			s.HTTPAddr, s.GRPCAddr, s.DebugAddr, s.ReadyFile = "0.0.0.0:0", "0.0.0.0:0", "0.0.0.0:0", "/run/ready.json"
		},
	},
	{
		name: "TLS files, as envoyproxy names them",
		env: map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/t/s.pem", "GRPC_SERVER_TLS_KEY": "/t/s.key",
			"GRPC_CLIENT_TLS_CACERT": "/t/ca.pem", "GRPC_CLIENT_TLS_SAN": "envoy.local",
			"REDIS_TLS_CACERT": "/t/rca.pem", "REDIS_TLS_CLIENT_CERT": "/t/c.pem", "REDIS_TLS_CLIENT_KEY": "/t/c.key",
			"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"},
		want: func(s *settings) {
			s.GRPCTLS, s.GRPCTLSCert, s.GRPCTLSKey = true, "/t/s.pem", "/t/s.key"
			s.GRPCClientCACert, s.GRPCClientSAN = "/t/ca.pem", "envoy.local"
			s.RedisTLSCACert, s.RedisTLSClientCert, s.RedisTLSClientKey = "/t/rca.pem", "/t/c.pem", "/t/c.key"
			s.RedisTLSSkipVerifyHost = true
		},
	},
	{
		name: "a socket path means a unix socket",
		env:  map[string]string{"REDIS_URL": "/var/run/redis.sock"},
		want: func(s *settings) {
			s.Backend, s.RedisURL, s.RedisSocketType = backendRedis, "/var/run/redis.sock", "unix"
		},
	},
	{
		name: "REDIS_SOCKET_TYPE is explicit",
		env:  map[string]string{"REDIS_URL": "localhost:6379", "REDIS_SOCKET_TYPE": "TCP"},
		want: func(s *settings) { s.Backend, s.RedisURL = backendRedis, "localhost:6379" },
	},
	{
		name: "BACKEND_TYPE=memory wins over REDIS_URL",
		env:  map[string]string{"BACKEND_TYPE": "memory", "REDIS_URL": "redis:6379", "MEMORY_MAX_KEYS": "1000"},
		want: func(s *settings) { s.RedisURL, s.MemoryMaxKeys = "redis:6379", 1000 },
	},
	{
		name: "flags override the environment",
		env:  map[string]string{"RUNTIME_ROOT": "/data", "GRPC_PORT": "1", "PORT": "2", "BACKEND_TYPE": "redis", "REDIS_URL": "a:1"},
		args: []string{"--config", "api/examples/", "--grpc-addr", "127.0.0.1:0", "--http-addr=:0", "--debug-addr", "localhost:0", "--backend", "memory", "--redis-url", "b:2"},
		want: func(s *settings) {
			s.ConfigDir, s.WatchPath = "api/examples", "api/examples"
			s.GRPCAddr, s.HTTPAddr, s.DebugAddr = "127.0.0.1:0", ":0", "localhost:0"
			s.RedisURL = "b:2"
		},
	},
}
