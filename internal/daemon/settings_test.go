package daemon

import (
	"reflect"
	"regexp"
	"slices"
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
		RedisBatchLimit:           redisstore.DefaultBatchLimit,
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
		Overload:                  overloadSettings{MaxConcurrentRequests: defaultMaxConcurrentRequests},
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
	for _, tt := range slices.Concat(parseSettingsTests, backendSettingsTests) {
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
