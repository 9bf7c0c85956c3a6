package daemon

import "strings"

// promSettings are envoyproxy's USE_PROMETHEUS settings: a listener of its
// own for the metrics, where Envoy Gateway's pod monitor scrapes them.
type promSettings struct {
	Enabled    bool
	Addr       string
	Path       string
	MapperYAML string
	// ResponseTimeMillis is PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: the
	// built-in mapping keeps ratelimit_service_response_time_seconds in
	// milliseconds, as envoyproxy's did before it fixed the unit.
	ResponseTimeMillis bool
}

// readPrometheus reads USE_PROMETHEUS and, when it is on, PROMETHEUS_ADDR,
// PROMETHEUS_PATH and PROMETHEUS_MAPPER_YAML (envoyproxy's defaults).
func (s *settings) readPrometheus(env *envReader) {
	if !env.boolean("USE_PROMETHEUS", false) {
		return
	}
	p := &s.Prometheus
	p.Enabled = true
	p.Addr = env.str("PROMETHEUS_ADDR", ":9090")
	p.Path = env.str("PROMETHEUS_PATH", "/metrics")
	if !strings.HasPrefix(p.Path, "/") {
		env.fail("PROMETHEUS_PATH", p.Path, "a path starting with /")
	}
	p.MapperYAML = env.str("PROMETHEUS_MAPPER_YAML", "")
	p.ResponseTimeMillis = env.boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)
}
