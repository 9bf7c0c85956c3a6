package daemon

import (
	"net/http"
)

// promServer serves the metrics on PROMETHEUS_ADDR when USE_PROMETHEUS is
// on: envoyproxy's stats as its statsd_exporter mapping names them, and
// ratelimitd's own (see envoyStats.handler).
func promServer(set settings, metrics http.Handler) *http.Server {
	if !set.Prometheus.Enabled {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle(set.Prometheus.Path, metrics)
	return newHTTPServer(mux)
}
