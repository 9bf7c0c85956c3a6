package daemon

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

// parseOrReject parses env as the settings; when wantErr is set it checks
// the parse fails naming it and reports false (nothing left to compare).
func parseOrReject(t *testing.T, env map[string]string, wantErr string) (settings, bool) {
	t.Helper()
	s, err := parseSettings(nil, envOf(env))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err %v, want one naming %s", err, wantErr)
		}
		return s, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

// defaultSettings is what an empty environment and no flags give.
func defaultSettings() settings {
	return settings{
		ConfigDir:                 "/srv/runtime_data/current/config",
		WatchPath:                 "/srv/runtime_data/current",
		GRPCAddr:                  "0.0.0.0:8081",
		HTTPAddr:                  "0.0.0.0:8080",
		DebugAddr:                 "0.0.0.0:6070",
		GRPCMaxConnectionAge:      24 * time.Hour,
		GRPCMaxConnectionAgeGrace: time.Hour,
		ShutdownTimeout:           10 * time.Second,
		Backend:                   backendMemory,
		RedisSocketType:           "tcp",
		RedisType:                 redisstore.Single,
		RedisPoolSize:             10,
		RedisTimeout:              10 * time.Second,
		RedisPipelineWindow:       redisstore.DefaultPipelineWindow,
		RedisBreakerThreshold:     redisstore.DefaultBreakerThreshold,
		RedisBreakerProbeInterval: redisstore.DefaultBreakerProbeInterval,
		LogLevel:                  zapcore.WarnLevel,
		MaxDescriptors:            service.DefaultMaxDescriptors,
		MaxEntries:                service.DefaultMaxEntries,
		MaxValueLen:               service.DefaultMaxValueLen,
		NearLimitRatio:            0.8,
		MaxDetailedSeries:         metrics.DefaultDetailedSeries,
		MemoryMaxKeys:             memstore.DefaultMaxKeys,
		LocalCacheMaxAge:          defaultLocalCacheMaxAge,
		GRPCMaxStreams:            defaultGRPCMaxStreams,
		MaxDecodingBytes:          service.DefaultDecodeBudget,
		Queue:                     queueSettings{Enabled: true, MetricQueues: 100, KeyPrefix: "ratelimitd:queue:"},
		Lease:                     defaultLeaseSettings(),
		Stats:                     statsSettings{Statsd: true, Host: "localhost", Port: 8125, Protocol: "tcp", FlushInterval: 10 * time.Second},
		RLQS:                      defaultRLQSSettings(),
		Fallback:                  defaultFallbackSettings(),
		Headers: service.Headers{
			Limit: service.DefaultLimitHeader, Remaining: service.DefaultRemainingHeader, Reset: service.DefaultResetHeader,
			RequestLimit: service.DefaultLimitHeader, RequestRemaining: service.DefaultRemainingHeader, RequestReset: service.DefaultResetHeader,
		},
	}
}

var parseSettingsTests = []struct {
	name string
	env  map[string]string
	args []string
	want func(*settings)
}{
	{name: "defaults", want: func(*settings) {}},
	{
		name: "runtime directories",
		env:  map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_APPDIRECTORY": "cfg", "RUNTIME_IGNOREDOTFILES": "true"},
		want: func(s *settings) {
			s.ConfigDir, s.WatchPath, s.IgnoreDotfiles = "/data/ratelimit/cfg", "/data", true
		},
	},
	{
		name: "RUNTIME_WATCH_ROOT=false watches the config directory",
		env:  map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_WATCH_ROOT": "false"},
		want: func(s *settings) { s.ConfigDir, s.WatchPath = "/data/config", "/data/config" },
	},
	{
		name: "addresses",
		env:  map[string]string{"HOST": "127.0.0.1", "PORT": "9080", "GRPC_HOST": "::1", "GRPC_PORT": "9081", "DEBUG_PORT": "0"},
		want: func(s *settings) { s.HTTPAddr, s.GRPCAddr, s.DebugAddr = "127.0.0.1:9080", "[::1]:9081", "0.0.0.0:0" },
	},
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
	{
		name: "logging and service limits",
		env: map[string]string{"LOG_LEVEL": "Debug", "LOG_FORMAT": "JSON", "SHADOW_MODE": "1", "MERGE_DOMAIN_CONFIG": "true",
			"MAX_DESCRIPTORS": "8", "MAX_DESCRIPTOR_ENTRIES": "4", "MAX_VALUE_LENGTH": "64", "SHUTDOWN_TIMEOUT": "3s"},
		want: func(s *settings) {
			s.LogLevel, s.LogJSON, s.ShadowMode, s.MergeDomains = zapcore.DebugLevel, true, true, true
			s.MaxDescriptors, s.MaxEntries, s.MaxValueLen, s.ShutdownTimeout = 8, 4, 64, 3*time.Second
		},
	},
	{
		name: "logrus level names",
		env:  map[string]string{"LOG_LEVEL": "trace"},
		want: func(s *settings) { s.LogLevel = zapcore.DebugLevel },
	},
	{
		name: "unsupported settings are warned about",
		env:  map[string]string{"GRPC_UDS": "/tmp/x.sock", "LOCAL_CACHE_SIZE_IN_BYTES": "1000"},
		want: func(s *settings) {
			s.LocalCacheBytes = 1000
			s.Warnings = []string{"GRPC_UDS=/tmp/x.sock is not supported and has no effect"}
		},
	},
	{
		name: "envoyproxy's stats settings",
		env: map[string]string{"STATSD_HOST": "statsd", "STATSD_PORT": "9125", "STATSD_PROTOCOL": "UDP",
			"STATS_FLUSH_INTERVAL": "1s", "EXTRA_TAGS": "env:prod, team : rl", "DISABLE_STATS": "false"},
		want: func(s *settings) {
			s.Stats = statsSettings{Statsd: true, Host: "statsd", Port: 9125, Protocol: "udp", FlushInterval: time.Second,
				ExtraTags: map[string]string{"env": "prod", "team": "rl"}}
		},
	},
	{
		name: "USE_PROMETHEUS turns statsd off unless USE_STATSD says otherwise",
		env:  map[string]string{"USE_PROMETHEUS": "true"},
		want: func(s *settings) {
			s.Prometheus = promSettings{Enabled: true, Addr: ":9090", Path: "/metrics"}
			s.Stats.Statsd = false
		},
	},
	{
		name: "USE_DOG_STATSD replaces statsd",
		env: map[string]string{"USE_DOG_STATSD": "true", "USE_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "hits",
			"DOG_STATSD_MOGRIFIER_HITS_PATTERN": `^ratelimit\.service\.rate_limit\.(.*)\.total_hits$`,
			"DOG_STATSD_MOGRIFIER_HITS_NAME":    "ratelimit.total_hits", "DOG_STATSD_MOGRIFIER_HITS_TAGS": "key:$1"},
		want: func(s *settings) {
			s.Stats.Statsd, s.Stats.DogStatsd = false, true
			s.Stats.Mogrifiers = []envoystats.Mogrifier{{Pattern: regexp.MustCompile(`^ratelimit\.service\.rate_limit\.(.*)\.total_hits$`),
				Name: "ratelimit.total_hits", Tags: map[string]string{"key": "$1"}}}
			s.Warnings = []string{"USE_STATSD=true has no effect with USE_DOG_STATSD=true: the stats go to DogStatsD only"}
		},
	},
	{
		name: "startup and health",
		env: map[string]string{"FORCE_START_WITHOUT_INITIAL_CONFIG": "true", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true",
			"RESPONSE_DYNAMIC_METADATA": "true", "QUOTA_MODE": "true"},
		want: func(s *settings) {
			s.ForceStartWithoutConfig, s.HealthyWithAtLeastOneConfig, s.DynamicMetadata, s.QuotaMode = true, true, true, true
		},
	},
	{
		name: "metrics",
		env:  map[string]string{"NEAR_LIMIT_RATIO": "0.9", "MAX_DETAILED_METRIC_SERIES": "50"},
		want: func(s *settings) { s.NearLimitRatio, s.MaxDetailedSeries = 0.9, 50 },
	},
	{
		name: "response headers",
		env: map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-Left",
			"LIMIT_DRAFT_HEADERS_ENABLED": "true", "LIMIT_RETRY_AFTER_HEADER_ENABLED": "true"},
		want: func(s *settings) {
			s.Headers.Classic, s.Headers.Remaining, s.Headers.Draft, s.Headers.RetryAfter = true, "X-Left", true, true
		},
	},
	{
		name: "lease settings",
		env: map[string]string{"REDIS_URL": "redis:6379", "LEASE_ENABLED": "true", "LEASE_TARGET": "500ms", "LEASE_MAX_BLOCK": "2",
			"LEASE_FRACTION": "1", "LEASE_IDLE": "1s", "LEASE_MAX_AGE": "1m", "LEASE_MAX_KEYS": "10"},
		want: func(s *settings) {
			s.Backend, s.RedisURL = backendRedis, "redis:6379"
			s.Lease = leaseSettings{Enabled: true, Target: 500 * time.Millisecond, MaxBlock: 2, Fraction: 1, Idle: time.Second, MaxAge: time.Minute, MaxKeys: 10}
		},
	},
	{
		name: "on_store_error settings",
		env:  map[string]string{"ON_STORE_ERROR": "Local", "LOCAL_FALLBACK_REPLICAS": "3", "LOCAL_FALLBACK_HEARTBEAT": "250ms"},
		want: func(s *settings) {
			s.Fallback = fallbackSettings{Default: config.StoreErrorLocal, Replicas: 3, Heartbeat: 250 * time.Millisecond}
		},
	},
	{
		name: "rlqs settings",
		env: map[string]string{"RLQS_ENABLED": "false", "RLQS_REPORTING_INTERVAL": "1s", "RLQS_FRACTION": "0.5",
			"RLQS_MAX_BLOCK": "100", "RLQS_EXPIRY_MARGIN": "50ms", "RLQS_MAX_BUCKETS": "5000"},
		want: func(s *settings) {
			s.RLQS = rlqsSettings{Interval: time.Second, Fraction: 0.5, MaxBlock: 100, Margin: 50 * time.Millisecond, MaxBuckets: 5000}
		},
	},
	{
		name: "LEASE_ENABLED on the embedded store is warned about",
		env:  map[string]string{"LEASE_ENABLED": "true"},
		want: func(s *settings) {
			s.Lease.Enabled = true
			s.Warnings = []string{"LEASE_ENABLED=true has no effect with the embedded store (BACKEND_TYPE=memory): it is one process and never leases"}
		},
	},
	{
		name: "empty values mean unset",
		env:  map[string]string{"PORT": "", "LOG_LEVEL": " "},
		want: func(*settings) {},
	},
}

func TestParseSettings(t *testing.T) {
	for _, tt := range parseSettingsTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettings(tt.args, envOf(tt.env))
			if err != nil {
				t.Fatalf("parseSettings: %v", err)
			}
			want := defaultSettings()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("settings:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // every one must appear in the error
	}{
		{name: "bad port", env: map[string]string{"PORT": "http"}, want: []string{`PORT="http"`, "integer between 0 and 65535"}},
		{name: "port out of range", env: map[string]string{"GRPC_PORT": "70000"}, want: []string{`GRPC_PORT="70000"`}},
		{name: "duration without unit", env: map[string]string{"REDIS_TIMEOUT": "10"}, want: []string{`REDIS_TIMEOUT="10"`, "Go duration"}},
		{name: "zero redis timeout", env: map[string]string{"REDIS_TIMEOUT": "0s"}, want: []string{"REDIS_TIMEOUT", "positive"}},
		{name: "zero probe interval", env: map[string]string{"REDIS_BREAKER_PROBE_INTERVAL": "0"}, want: []string{"REDIS_BREAKER_PROBE_INTERVAL", "positive"}},
		{name: "negative breaker threshold", env: map[string]string{"REDIS_BREAKER_THRESHOLD": "-1"}, want: []string{`REDIS_BREAKER_THRESHOLD="-1"`}},
		{name: "bad boolean", env: map[string]string{"SHADOW_MODE": "maybe"}, want: []string{`SHADOW_MODE="maybe"`, "true or false"}},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, want: []string{`LOG_LEVEL="loud"`}},
		{name: "bad log format", env: map[string]string{"LOG_FORMAT": "xml"}, want: []string{`LOG_FORMAT="xml"`, "text, json"}},
		{name: "bad redis type", env: map[string]string{"REDIS_TYPE": "ring"}, want: []string{`REDIS_TYPE="ring"`, "SINGLE, SENTINEL, CLUSTER"}},
		{name: "bad socket type", env: map[string]string{"REDIS_SOCKET_TYPE": "udp"}, want: []string{`REDIS_SOCKET_TYPE="udp"`}},
		{name: "bad pool size", env: map[string]string{"REDIS_POOL_SIZE": "0"}, want: []string{`REDIS_POOL_SIZE="0"`}},
		{name: "bad STATSD_PROTOCOL", env: map[string]string{"STATSD_PROTOCOL": "sctp"}, want: []string{`STATSD_PROTOCOL="sctp"`, "tcp, udp"}},
		{name: "zero STATS_FLUSH_INTERVAL", env: map[string]string{"STATS_FLUSH_INTERVAL": "0s"}, want: []string{"STATS_FLUSH_INTERVAL", "positive"}},
		{name: "bad EXTRA_TAGS", env: map[string]string{"EXTRA_TAGS": "env=prod"}, want: []string{`EXTRA_TAGS="env=prod"`, "key:value"}},
		{name: "mogrifier without a pattern", env: map[string]string{"USE_DOG_STATSD": "true", "USE_DOG_STATSD_MOGRIFIERS": "x"},
			want: []string{"DOG_STATSD_MOGRIFIER_X_PATTERN"}},
		{name: "bad backend", env: map[string]string{"BACKEND_TYPE": "memcache"}, want: []string{`BACKEND_TYPE="memcache"`}},
		{name: "redis without a URL", env: map[string]string{"BACKEND_TYPE": "redis"}, want: []string{"BACKEND_TYPE=redis needs REDIS_URL"}},
		{name: "half a client certificate", env: map[string]string{"REDIS_TLS_CLIENT_CERT": "/c.pem"}, want: []string{"REDIS_TLS_CLIENT_KEY"}},
		{name: "every bad variable at once", env: map[string]string{"PORT": "x", "DEBUG_PORT": "y", "REDIS_TLS": "z"},
			want: []string{`PORT="x"`, `DEBUG_PORT="y"`, `REDIS_TLS="z"`}},
		{name: "bad LEASE_ENABLED", env: map[string]string{"LEASE_ENABLED": "sometimes"}, want: []string{`LEASE_ENABLED="sometimes"`, "true or false"}},
		{name: "bad ON_STORE_ERROR", env: map[string]string{"ON_STORE_ERROR": "open"}, want: []string{`ON_STORE_ERROR="open"`, "unavailable, allow, deny or local"}},
		{name: "bad LOCAL_FALLBACK_*", env: map[string]string{"LOCAL_FALLBACK_REPLICAS": "0", "LOCAL_FALLBACK_HEARTBEAT": "2m"},
			want: []string{`LOCAL_FALLBACK_REPLICAS="0"`, `LOCAL_FALLBACK_HEARTBEAT="2m"`}},
		{name: "zero LEASE_TARGET", env: map[string]string{"LEASE_TARGET": "0s"}, want: []string{`LEASE_TARGET="0s"`, "positive Go duration of at most 24h0m0s"}},
		{name: "LEASE_IDLE without a unit", env: map[string]string{"LEASE_IDLE": "2"}, want: []string{`LEASE_IDLE="2"`, "Go duration"}},
		{name: "LEASE_MAX_AGE over a day", env: map[string]string{"LEASE_MAX_AGE": "25h"}, want: []string{`LEASE_MAX_AGE="25h"`, "at most 24h0m0s"}},
		{name: "LEASE_MAX_BLOCK of 1", env: map[string]string{"LEASE_MAX_BLOCK": "1"}, want: []string{`LEASE_MAX_BLOCK="1"`, "between 2 and 1099511627776"}},
		{name: "LEASE_FRACTION of 0", env: map[string]string{"LEASE_FRACTION": "0"}, want: []string{`LEASE_FRACTION="0"`, "above 0 and at most 1"}},
		{name: "LEASE_FRACTION above 1", env: map[string]string{"LEASE_FRACTION": "1.5"}, want: []string{`LEASE_FRACTION="1.5"`}},
		{name: "LEASE_FRACTION NaN", env: map[string]string{"LEASE_FRACTION": "NaN"}, want: []string{`LEASE_FRACTION="NaN"`}},
		{name: "LEASE_MAX_KEYS of 0", env: map[string]string{"LEASE_MAX_KEYS": "0"}, want: []string{`LEASE_MAX_KEYS="0"`}},
		{name: "every bad LEASE_ setting at once", env: map[string]string{"LEASE_TARGET": "-1s", "LEASE_MAX_BLOCK": "x", "LEASE_IDLE": "0"},
			want: []string{`LEASE_TARGET="-1s"`, `LEASE_MAX_BLOCK="x"`, `LEASE_IDLE="0"`}},
		{name: "RLQS_REPORTING_INTERVAL under a second", env: map[string]string{"RLQS_REPORTING_INTERVAL": "500ms"}, want: []string{`RLQS_REPORTING_INTERVAL="500ms"`, "at least 1s"}},
		{name: "RLQS_FRACTION of 0", env: map[string]string{"RLQS_FRACTION": "0"}, want: []string{`RLQS_FRACTION="0"`, "above 0"}},
		{name: "RLQS_MAX_BLOCK of 0", env: map[string]string{"RLQS_MAX_BLOCK": "0"}, want: []string{`RLQS_MAX_BLOCK="0"`}},
		{name: "unknown flag", args: []string{"--nope"}, want: []string{"flags", "nope"}},
		{name: "stray argument", args: []string{"serve"}, want: []string{`unexpected argument "serve"`}},
		{name: "bad flag address", args: []string{"--grpc-addr", "8081"}, want: []string{"--grpc-addr", "host:port"}},
		{name: "bad flag backend", args: []string{"--backend", "disk"}, want: []string{`"disk"`, "memory or redis"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSettings(tt.args, envOf(tt.env))
			if err == nil {
				t.Fatal("parseSettings succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
