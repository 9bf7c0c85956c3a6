package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
)

// promServer serves the metrics on PROMETHEUS_ADDR when USE_PROMETHEUS is
// on; they stay on the debug port as well.
func promServer(set settings, metrics http.Handler, log *zap.Logger) (*http.Server, error) {
	if !set.Prometheus.Enabled {
		return nil, nil
	}
	if f := set.Prometheus.MapperYAML; f != "" {
		n, err := checkMapper(f)
		if err != nil {
			return nil, fmt.Errorf("PROMETHEUS_MAPPER_YAML: %w", err)
		}
		// envoyproxy emits statsd names and needs the statsd_exporter
		// mapping to make Prometheus metrics of them; ratelimitd's metrics
		// are Prometheus-native, labelled by domain and rule, so the
		// mapping has nothing to apply to. Say so once instead of
		// pretending to apply it.
		log.Warn("PROMETHEUS_MAPPER_YAML is checked but not applied: ratelimitd exports native Prometheus metrics (ratelimitd_*, labelled domain and rule; see docs/platforms.md, section Metrics on PROMETHEUS_ADDR)",
			zap.String("file", f), zap.Int("mappings", n))
	}
	mux := http.NewServeMux()
	mux.Handle(set.Prometheus.Path, metrics)
	return newHTTPServer(mux), nil
}

// checkMapper reads a statsd_exporter mapping file as envoyproxy would at
// start: a file that does not load fails the start there too.
func checkMapper(file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Mappings []struct {
			Match string `yaml:"match"`
			Name  string `yaml:"name"`
		} `yaml:"mappings"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	for i, m := range doc.Mappings {
		if m.Match == "" {
			return 0, fmt.Errorf("%s: mappings[%d]: match is empty", file, i)
		}
	}
	if len(doc.Mappings) == 0 {
		return 0, errors.New(file + ": no mappings")
	}
	return len(doc.Mappings), nil
}
