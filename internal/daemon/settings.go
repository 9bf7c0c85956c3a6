package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// settings is everything Run needs, read from envoyproxy/ratelimit's
// environment variables (same names and, where sensible, same defaults) and
// overridden by flags.
type settings struct {
	// ConfigDir holds the YAML files; WatchPath is what the watcher watches
	// (RUNTIME_ROOT when RUNTIME_WATCH_ROOT, so a runtime symlink swap is
	// seen).
	ConfigDir      string
	WatchPath      string
	Version        string // the build's (Run's), not a setting: the xDS user agent
	IgnoreDotfiles bool
	MergeDomains   bool
	// CalendarMonths: USE_CALENDAR_MONTH_RATE_LIMIT.
	CalendarMonths bool

	GRPCAddr string
	// gRPC server TLS, as envoyproxy names it: GRPC_SERVER_USE_TLS,
	// GRPC_SERVER_TLS_CERT/KEY, GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN.
	GRPCTLS          bool
	GRPCTLSCert      string
	GRPCTLSKey       string
	GRPCClientCACert string
	GRPCClientSAN    string
	HTTPAddr         string
	DebugAddr        string

	GRPCMaxConnectionAge      time.Duration
	GRPCMaxConnectionAgeGrace time.Duration
	ShutdownTimeout           time.Duration

	Backend         backendKind
	RedisURL        string
	RedisSocketType string // tcp or unix
	RedisType       redisstore.Type
	RedisAuth       string
	RedisTLS        bool
	// TLS files and options as envoyproxy names them.
	RedisTLSCACert         string
	RedisTLSClientCert     string
	RedisTLSClientKey      string
	RedisTLSSkipVerifyHost bool
	RedisPoolSize          int
	RedisTimeout           time.Duration
	CacheKeyPrefix         string
	MemoryMaxKeys          int
	// LocalCacheBytes is LOCAL_CACHE_SIZE_IN_BYTES (0 = no cache).
	LocalCacheBytes int
	// LocalCacheMaxAge is LOCAL_CACHE_MAX_AGE: the longest a cached denial
	// is answered without the backend (0 = until it lifts).
	LocalCacheMaxAge time.Duration
	// NearLimitRatio is NEAR_LIMIT_RATIO; MaxDetailedSeries caps metric
	// series labelled with request values (detailed_metric).
	NearLimitRatio    float64
	MaxDetailedSeries int

	LogLevel zapcore.Level
	LogJSON  bool
	// Stats is envoyproxy's stats: statsd, DogStatsD (settings_statsd.go).
	Stats statsSettings

	ShadowMode bool
	// ForceStartWithoutConfig and HealthyWithAtLeastOneConfig are
	// envoyproxy's FORCE_START_WITHOUT_INITIAL_CONFIG and
	// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
	ForceStartWithoutConfig     bool
	HealthyWithAtLeastOneConfig bool
	// DynamicMetadata and QuotaMode are RESPONSE_DYNAMIC_METADATA and
	// QUOTA_MODE.
	DynamicMetadata bool
	QuotaMode       bool
	// QuotaGroups is QUOTA_GROUP_BY_BACKEND (settings_responses.go).
	QuotaGroups    bool
	Headers        service.Headers
	MaxDescriptors int
	MaxEntries     int
	MaxValueLen    int

	// RedisPipelineWindow and RedisPipelineLimit are REDIS_PIPELINE_WINDOW
	// and REDIS_PIPELINE_LIMIT: concurrent decisions share round trips.
	RedisPipelineWindow time.Duration
	RedisPipelineLimit  int
	// RedisBatchLimit is REDIS_BATCH_LIMIT: the most takes in one script call.
	RedisBatchLimit int
	// RedisBreakerThreshold and RedisBreakerProbeInterval are
	// REDIS_BREAKER_THRESHOLD and REDIS_BREAKER_PROBE_INTERVAL: a node that
	// failed that many calls in a row is answered UNAVAILABLE at once until
	// a PING every interval gets through (0 turns the breaker off).
	RedisBreakerThreshold     int
	RedisBreakerProbeInterval time.Duration
	// ReadyFile is --ready-file (READY_FILE): where the bound addresses are
	// written once every listener is open, so that a caller that asked for
	// port 0 learns the ports.
	ReadyFile string
	// XDS is CONFIG_TYPE=GRPC_XDS_SOTW and its settings (settings_xds.go).
	XDS xdsSettings
	// Prometheus is USE_PROMETHEUS and its settings (settings_prometheus.go).
	Prometheus promSettings
	// Tracing is TRACING_ENABLED and its settings (settings_tracing.go).
	Tracing tracingSettings
	Queue   queueSettings
	// Admin is the counters API's credentials (settings_admin.go).
	Admin adminSettings
	// Lease is LEASE_ENABLED and the other LEASE_* settings
	// (settings_lease.go).
	Lease leaseSettings
	// RLQS is RLQS_ENABLED and the other RLQS_* settings (rlqs.go).
	RLQS rlqsSettings
	// Fallback is ON_STORE_ERROR and LOCAL_FALLBACK_*
	// (settings_fallback.go).
	Fallback fallbackSettings

	// Warnings are logged once at startup: settings we accept for
	// compatibility but do not act on.
	Warnings []string

	// Overload is MAX_CONCURRENT_REQUESTS and REQUEST_TIMEOUT
	// (settings_overload.go).
	Overload overloadSettings

	// Hardening (settings_limits.go): GRPC_MAX_RECV_MESSAGE_SIZE (0: the
	// largest request the caps admit), GRPC_MAX_CONCURRENT_STREAMS,
	// MAX_DECODING_BYTES and DEBUG_PPROF.
	GRPCMaxRecvBytes int
	GRPCMaxStreams   int
	MaxDecodingBytes int
	DebugPprof       bool
}

// ignoredSettings are envoyproxy settings a deployment may set that have no
// effect here; setting one is worth a warning, not a failed start.
func ignoredSettings() []string {
	return []string{
		"REDIS_PERSECOND",
		"GRPC_UDS", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
	}
}

const maxPort = 65535

// parseSettings reads env through lookup, then applies args (flags). Each
// concern has its own reader; every bad variable is collected and reported
// at once.
func parseSettings(args []string, lookup func(string) (string, bool)) (settings, error) {
	env := &envReader{lookup: lookup}
	var s settings
	s.readConfigSource(env)
	s.readListeners(env)
	backend, redisType := s.readBackend(env)
	s.readLogging(env)
	s.readResponses(env)
	s.readWarnings(env)
	s.readHardening(env)
	s.readOverload(env)
	s.readXDS(env)
	s.readPrometheus(env)
	s.readStats(env)
	s.readTracing(env)
	s.Queue = readQueueSettings(env)
	s.readAdmin(env)
	s.readLease(env)
	s.readFallback(env)
	s.RLQS = readRLQSSettings(env)
	if err := env.err(); err != nil {
		return settings{}, fmt.Errorf("invalid environment: %w", err)
	}
	// oneOf has already checked the spelling.
	s.RedisType, _ = redisstore.ParseType(redisType)
	if (s.RedisTLSClientCert == "") != (s.RedisTLSClientKey == "") {
		return settings{}, fmt.Errorf("REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY must be set together")
	}
	if err := s.readFlags(args, &backend); err != nil {
		return settings{}, err
	}
	if err := s.resolveBackend(backend); err != nil {
		return settings{}, err
	}
	s.Warnings = append(s.Warnings, s.backend().warnings()...)
	return s, nil
}

// readListeners reads the three listen addresses and how the servers
// treat connections.
func (s *settings) readListeners(env *envReader) {
	s.HTTPAddr = hostPort(env, "HOST", "PORT", 8080)
	s.GRPCAddr = hostPort(env, "GRPC_HOST", "GRPC_PORT", 8081)
	s.DebugAddr = hostPort(env, "DEBUG_HOST", "DEBUG_PORT", 6070)
	s.GRPCTLS = env.boolean("GRPC_SERVER_USE_TLS", false)
	s.GRPCTLSCert = env.str("GRPC_SERVER_TLS_CERT", "")
	s.GRPCTLSKey = env.str("GRPC_SERVER_TLS_KEY", "")
	s.GRPCClientCACert = env.str("GRPC_CLIENT_TLS_CACERT", "")
	s.GRPCClientSAN = env.str("GRPC_CLIENT_TLS_SAN", "")
	s.GRPCMaxConnectionAge = env.duration("GRPC_MAX_CONNECTION_AGE", 24*time.Hour)
	s.GRPCMaxConnectionAgeGrace = env.duration("GRPC_MAX_CONNECTION_AGE_GRACE", time.Hour)
	s.ShutdownTimeout = env.duration("SHUTDOWN_TIMEOUT", 10*time.Second)
	s.ReadyFile = env.str("READY_FILE", "")
}

// readLogging reads the log level and format, and the metric settings.
func (s *settings) readLogging(env *envReader) {
	s.LogLevel = zapcore.WarnLevel
	if v, ok := env.raw("LOG_LEVEL"); ok {
		lvl, err := parseLogLevel(v)
		if err != nil {
			env.fail("LOG_LEVEL", v, "one of debug, info, warn, error")
		} else {
			s.LogLevel = lvl
		}
	}
	s.LogJSON = env.oneOf("LOG_FORMAT", "text", "text", "json") == "json"
	s.NearLimitRatio = env.fraction("NEAR_LIMIT_RATIO", 0.8)
	s.MaxDetailedSeries = env.integer("MAX_DETAILED_METRIC_SERIES", metrics.DefaultDetailedSeries, 0, 1<<20)
}

// readWarnings notes the settings accepted for compatibility that do
// nothing here.
func (s *settings) readWarnings(env *envReader) {
	s.readGatewayCompat(env)
	for _, name := range ignoredSettings() {
		if v, ok := env.raw(name); ok {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s=%s is not supported and has no effect", name, v))
		}
	}
}

// readFlags applies the command line over the environment; the flags and
// their help come from serveFlags (usage.go).
func (s *settings) readFlags(args []string, backend *string) error {
	fs := flag.NewFlagSet("ratelimitd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configDir string
	targets := map[string]*string{
		"config": &configDir, "grpc-addr": &s.GRPCAddr, "http-addr": &s.HTTPAddr,
		"debug-addr": &s.DebugAddr, "backend": backend, "redis-url": &s.RedisURL,
		"ready-file": &s.ReadyFile,
	}
	for _, f := range serveFlags() {
		p := targets[f.name]
		fs.StringVar(p, f.name, *p, f.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return fmt.Errorf("flags: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("flags: unexpected argument %q", fs.Arg(0))
	}
	if configDir != "" {
		s.ConfigDir = filepath.Clean(configDir)
		s.WatchPath = s.ConfigDir
	}
	for name, addr := range map[string]string{"--grpc-addr": s.GRPCAddr, "--http-addr": s.HTTPAddr, "--debug-addr": s.DebugAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: want host:port: %w", name, addr, err)
		}
	}
	return nil
}

func hostPort(env *envReader, hostVar, portVar string, defPort int) string {
	host := env.str(hostVar, "0.0.0.0")
	port := env.integer(portVar, defPort, 0, maxPort)
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// parseLogLevel accepts logrus's level names too (envoyproxy logs with
// logrus), mapping those zap lacks to the nearest zap level.
func parseLogLevel(v string) (zapcore.Level, error) {
	switch strings.ToLower(v) {
	case "trace":
		return zapcore.DebugLevel, nil
	case "warning":
		return zapcore.WarnLevel, nil
	}
	return zapcore.ParseLevel(strings.ToLower(v))
}
