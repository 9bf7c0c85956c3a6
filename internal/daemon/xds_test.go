package daemon

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/internal/xdstest"
)

// startXDS runs go-control-plane's ADS server over a snapshot cache.
func startXDS(t *testing.T) (string, cachev3.SnapshotCache) {
	t.Helper()
	return xdstest.Server(t)
}

// setXDS serves rpu an hour for k (an hour, as appConfig: the calls that
// count against it run on the wall clock).
func setXDS(t *testing.T, cache cachev3.SnapshotCache, node, version string, rpu uint32) {
	t.Helper()
	cfg := &rlsconfv3.RateLimitConfig{Name: "app", Domain: "app", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: rpu},
	}}}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: {cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

func xdsEnv(addr string, force bool) map[string]string {
	env := map[string]string{
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": addr, "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "20ms", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "100ms",
	}
	if force {
		env["FORCE_START_WITHOUT_INITIAL_CONFIG"] = "true"
	}
	return env
}

// TestXDSForceStart is Envoy Gateway's start: the service comes up
// without a config, unready, and becomes ready with the first ACK.
func TestXDSForceStart(t *testing.T) {
	addr, cache := startXDS(t)
	a, _, _, _ := startApp(t, xdsEnv(addr, true))
	conn := dial(t, a.grpcLn.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatus()
	}
	httpHealth := func() int {
		code, _ := httpGet(t, "http://"+a.httpLn.Addr().String()+"/healthcheck")
		return code
	}
	req := &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}},
	}}}

	if got := health(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before any config = %v", got)
	}
	if code := httpHealth(); code == http.StatusOK {
		t.Fatal("/healthcheck OK before any config")
	}
	if _, err := rls.ShouldRateLimit(ctx, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("ShouldRateLimit before any config: %v, want UNAVAILABLE", err)
	}

	setXDS(t, cache, "envoy-ratelimit", "1", 1)
	testkit.WaitFor(t, 5*time.Second, "SERVING", func() bool { return health() == healthpb.HealthCheckResponse_SERVING })
	if code := httpHealth(); code != http.StatusOK {
		t.Fatalf("/healthcheck = %d after the first config", code)
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("call %d: %v, %v; want %v", i, resp.GetOverallCode(), err, want)
		}
	}
	// Starting without a config is not a failed load; the first ACK is a load.
	_, body := httpGet(t, "http://"+a.debugLn.Addr().String()+"/metrics")
	if !strings.Contains(body, `ratelimitd_config_load_total{result="success"} 1`) || strings.Contains(body, `result="error"`) {
		t.Errorf("config load metrics:\n%s", grepLines(body, "config_load"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestXDSAwaitsInitialConfig: without FORCE_START_WITHOUT_INITIAL_CONFIG
// the start waits for the first config, as envoyproxy's does.
func TestXDSAwaitsInitialConfig(t *testing.T) {
	addr, cache := startXDS(t)
	for _, tc := range []struct {
		name     string
		snapshot bool
		wantErr  bool
	}{
		{"no config arrives", false, true},
		{"config arrives", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := parseSettings(nil, envOf(xdsEnv(addr, false)))
			if err != nil {
				t.Fatal(err)
			}
			a, err := newApp(set, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if tc.snapshot {
				setXDS(t, cache, "envoy-ratelimit", "1", 5)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = a.awaitConfig(ctx)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("awaitConfig: %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v does not say the wait timed out", err)
			}
			if !tc.wantErr && a.watcher.Current() == nil {
				t.Error("ready without a config")
			}
			if err := a.abort(nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestXDSSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(x xdsSettings) bool
		wantErr string
	}{
		{name: "files by default", env: nil, want: func(x xdsSettings) bool { return !x.Enabled }},
		{name: "envoyproxy defaults", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}, want: func(x xdsSettings) bool {
			return x.Enabled && x.ServerURL == "localhost:18000" && x.NodeID == "default" && x.Backoff.Initial == 10*time.Second && x.Backoff.Max == time.Minute
		}},
		{name: "Envoy Gateway's", env: map[string]string{
			"CONFIG_TYPE": "grpc_xds_sotw", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key",
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt",
		}, want: func(x xdsSettings) bool {
			return x.Enabled && x.ServerURL == "envoy-gateway:18001" && x.NodeID == "envoy-ratelimit" && x.UseTLS &&
				x.TLS.CertFile == "/certs/tls.crt" && x.TLS.KeyFile == "/certs/tls.key" && x.TLS.CAFile == "/certs/ca.crt"
		}},
		{name: "metadata and headers", env: map[string]string{
			"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "zone:a, team=rl", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-token:abc",
		}, want: func(x xdsSettings) bool {
			return x.NodeMetadata["zone"] == "a" && x.NodeMetadata["team"] == "rl" && x.Headers["x-token"] == "abc"
		}},
		{name: "bad type", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, wantErr: "CONFIG_TYPE"},
		{name: "bad pair", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "novalue"}, wantErr: "CONFIG_GRPC_XDS_NODE_METADATA"},
		{name: "backoff max below initial", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "1s"}, wantErr: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, ok := parseOrReject(t, tc.env, tc.wantErr); ok && !tc.want(s.XDS) {
				t.Fatalf("settings %+v", s.XDS)
			}
		})
	}
}

// Envoy Gateway's GRPC_SERVER_TLS_CA_CERT is read by neither envoyproxy nor
// ratelimitd: a warning says so unless GRPC_CLIENT_TLS_CACERT is set.
func TestGatewayCACertWarning(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		warn bool
	}{
		{map[string]string{"GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt"}, true},
		{map[string]string{"GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt", "GRPC_CLIENT_TLS_CACERT": "/certs/ca.crt"}, false},
		{nil, false},
	} {
		s, err := parseSettings(nil, envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, w := range s.Warnings {
			warned = warned || strings.Contains(w, "GRPC_SERVER_TLS_CA_CERT")
		}
		if warned != tc.warn {
			t.Errorf("%v: warned %v, want %v (%q)", tc.env, warned, tc.warn, s.Warnings)
		}
	}
}

// TestEnvoyGatewayContract parses exactly what Envoy Gateway sets: every
// variable is read, and the only warning is about the one envoyproxy does
// not read either.
func TestEnvoyGatewayContract(t *testing.T) {
	env := map[string]string{
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
		"LOG_LEVEL": "info", "USE_STATSD": "false", "CONFIG_TYPE": "GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key",
		"GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key",
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt", "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.redis-system:6379",
		"REDIS_TLS": "true", "REDIS_TLS_CLIENT_CERT": "/redis-certs/tls.crt", "REDIS_TLS_CLIENT_KEY": "/redis-certs/tls.key",
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
		"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit", "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
		"TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-abc", "TRACING_SAMPLING_RATE": "1.0",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318",
	}
	s, err := parseSettings(nil, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if !s.XDS.Enabled || !s.XDS.UseTLS || s.XDS.NodeID != "envoy-ratelimit" || !s.Prometheus.Enabled || s.Prometheus.Addr != ":19001" ||
		!s.Tracing.Enabled || s.Tracing.Service != "envoy-ratelimit" || !s.ForceStartWithoutConfig || !s.GRPCTLS || !s.RedisTLS ||
		s.Backend != backendRedis || s.ConfigDir != "/data/ratelimit/config" {
		t.Fatalf("settings %+v", s)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "GRPC_SERVER_TLS_CA_CERT") {
		t.Fatalf("warnings %q, want only the GRPC_SERVER_TLS_CA_CERT one", s.Warnings)
	}
}
