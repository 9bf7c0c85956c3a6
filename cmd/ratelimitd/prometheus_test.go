package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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

func TestPrometheusListener(t *testing.T) {
	mapper := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(mapper, []byte(mapperYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _, _, _ := startApp(t, map[string]string{
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:0", "PROMETHEUS_MAPPER_YAML": mapper,
	})
	for _, base := range []string{a.promLn.Addr().String(), a.debugLn.Addr().String()} {
		code, body := httpGet(t, "http://"+base+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, "ratelimitd_config_load_total") {
			t.Errorf("%s/metrics = %d, want ratelimitd's metrics", base, code)
		}
	}
	// Only the metrics: the config and pprof stay on the debug port.
	if code, _ := httpGet(t, "http://"+a.promLn.Addr().String()+"/rlconfig"); code != http.StatusNotFound {
		t.Errorf("/rlconfig on PROMETHEUS_ADDR = %d, want 404", code)
	}
}

func TestPrometheusSettings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	empty := filepath.Join(dir, "empty.yaml")
	broken := filepath.Join(dir, "broken.yaml")
	for f, data := range map[string]string{good: mapperYAML, empty: "mappings: []\n", broken: "mappings: [\n"} {
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		env     map[string]string
		path    string // served path; "" = no listener
		wantErr string
		warns   bool
	}{
		{name: "off", env: nil},
		{name: "envoyproxy defaults", env: map[string]string{"USE_PROMETHEUS": "true"}, path: "/metrics"},
		{name: "custom path", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "/prom"}, path: "/prom"},
		{name: "mapper checked and reported", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": good}, path: "/metrics", warns: true},
		{name: "missing mapper", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": filepath.Join(dir, "nope.yaml")}, wantErr: "PROMETHEUS_MAPPER_YAML"},
		{name: "broken mapper", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": broken}, wantErr: "broken.yaml"},
		{name: "mapper without mappings", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_MAPPER_YAML": empty}, wantErr: "no mappings"},
		{name: "relative path", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "metrics"}, wantErr: "PROMETHEUS_PATH"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := parseSettings(nil, envOf(tc.env))
			if err == nil {
				core, logs := observer.New(zapcore.WarnLevel)
				var srv *http.Server
				srv, err = promServer(set, http.NotFoundHandler(), zap.New(core))
				if err == nil {
					if (srv != nil) != (tc.path != "") {
						t.Fatalf("server %v, want one serving %q", srv != nil, tc.path)
					}
					if tc.path != "" && set.Prometheus.Path != tc.path {
						t.Errorf("path %q, want %q", set.Prometheus.Path, tc.path)
					}
					if got := logs.FilterMessageSnippet("PROMETHEUS_MAPPER_YAML").Len(); (got == 1) != tc.warns {
						t.Errorf("%d mapper warnings, want warned=%v", got, tc.warns)
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
