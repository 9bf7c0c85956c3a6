package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
)

// Envoy Gateway's statsd_exporter mapping, abridged.
const mapperYAML = `
mappings:
  - match: "ratelimit.service.rate_limit.*.*.near_limit"
    name: "ratelimit_service_rate_limit_near_limit"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "ratelimit_service_rate_limit_over_limit"
    labels:
      domain: "$1"
      key1: "$2"
`

// TestPrometheusListener: PROMETHEUS_ADDR serves envoyproxy's stats as the
// mapping file names them, beside ratelimitd's own; the debug port keeps
// ratelimitd's alone.
func TestPrometheusListener(t *testing.T) {
	mapper := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(mapper, []byte(mapperYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _, _, _ := startApp(t, map[string]string{
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0", "PROMETHEUS_MAPPER_YAML": mapper,
	})
	rls := rlsv3.NewRateLimitServiceClient(dial(t, a.grpcLn.Addr().String()))
	req := &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	for range 3 { // the limit is 1 an hour: 2 over
		if _, err := rls.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	_, prom := httpGet(t, "http://"+a.promLn.Addr().String()+"/metrics")
	for _, want := range []string{
		`ratelimit_service_rate_limit_over_limit{domain="app",key1="k"} 2`,
		`ratelimit_service_config_load_success 1`,         // unmapped here: its own name
		`ratelimit_service_rate_limit_app_k_total_hits 3`, // unmapped too
		`ratelimitd_config_load_total{result="success"} 1`,
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("PROMETHEUS_ADDR lacks %s:\n%s", want, prom)
		}
	}
	_, debug := httpGet(t, "http://"+a.debugLn.Addr().String()+"/metrics")
	if !strings.Contains(debug, "ratelimitd_config_load_total") || strings.Contains(debug, "ratelimit_service_") {
		t.Errorf("debug /metrics should hold ratelimitd's metrics alone:\n%s", debug)
	}
	// Only the metrics: the config and pprof stay on the debug port.
	if code, _ := httpGet(t, "http://"+a.promLn.Addr().String()+"/rlconfig"); code != http.StatusNotFound {
		t.Errorf("/rlconfig on PROMETHEUS_ADDR = %d, want 404", code)
	}
}

func TestPrometheusSettings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	broken := filepath.Join(dir, "broken.yaml")
	badRegex := filepath.Join(dir, "regex.yaml")
	for f, data := range map[string]string{good: mapperYAML, broken: "mappings: [\n", badRegex: "mappings:\n  - match: \"a(\"\n    match_type: regex\n    name: x\n"} {
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		env     map[string]string
		path    string // served path; "" = no listener
		wantErr string
	}{
		{name: "off", env: nil},
		{name: "envoyproxy defaults", env: map[string]string{"USE_PROMETHEUS": "true"}, path: "/metrics"},
		{name: "custom path", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "/prom"}, path: "/prom"},
		{name: "mapping file", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": good}, path: "/metrics"},
		{name: "missing mapper", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": filepath.Join(dir, "nope.yaml")}, wantErr: "PROMETHEUS_MAPPER_YAML"},
		{name: "broken mapper", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": broken}, wantErr: "broken.yaml"},
		{name: "bad regex", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": badRegex}, wantErr: "invalid regex"},
		{name: "stats disabled: no mapping read", env: map[string]string{"USE_PROMETHEUS": "true", "DISABLE_STATS": "true", "PROMETHEUS_MAPPER_YAML": broken}, path: "/metrics"},
		{name: "relative path", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "metrics"}, wantErr: "PROMETHEUS_PATH"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := parseSettings(nil, envOf(tc.env))
			if err == nil {
				var e *envoyStats
				if e, err = newEnvoyStats(set, zap.NewNop()); err == nil {
					defer e.close()
					srv := promServer(set, http.NotFoundHandler())
					if (srv != nil) != (tc.path != "") {
						t.Fatalf("server %v, want one serving %q", srv != nil, tc.path)
					}
					if tc.path != "" && set.Prometheus.Path != tc.path {
						t.Errorf("path %q, want %q", set.Prometheus.Path, tc.path)
					}
				}
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}
