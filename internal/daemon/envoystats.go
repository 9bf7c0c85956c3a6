package daemon

import (
	"fmt"
	"net/http"

	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
)

// envoyStats are envoyproxy/ratelimit's stats, sent where its settings say
// (USE_STATSD, USE_DOG_STATSD, USE_PROMETHEUS). A nil *envoyStats is off:
// every method is a no-op.
type envoyStats struct {
	stats *envoystats.Stats
	// prom holds the stats mapped to Prometheus; nil without USE_PROMETHEUS.
	prom *envoystats.Prometheus
}

// newEnvoyStats builds the sinks the settings ask for and starts flushing;
// nil when DISABLE_STATS is set or no sink is on. A mapping file that does
// not load fails the start, as it fails envoyproxy's.
func newEnvoyStats(set settings, log *zap.Logger) (*envoyStats, error) {
	st := set.Stats
	if st.Disabled {
		return nil, nil
	}
	e := &envoyStats{}
	var sinks []gostats.Sink
	if set.Prometheus.Enabled {
		var err error
		if e.prom, err = envoystats.NewPrometheus(set.Prometheus.MapperYAML, set.Prometheus.ResponseTimeMillis); err != nil {
			return nil, fmt.Errorf("PROMETHEUS_MAPPER_YAML: %w", err)
		}
		sinks = append(sinks, e.prom)
	}
	switch {
	case st.DogStatsd:
		sink, err := envoystats.NewDogStatsd(st.Host, st.Port, st.Mogrifiers)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, sink)
	case st.Statsd:
		sink, err := envoystats.NewStatsd(st.Host, st.Port, st.Protocol, log)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, sink)
	}
	if len(sinks) == 0 {
		return nil, nil
	}
	e.stats = envoystats.New(envoystats.Fanout(sinks...),
		envoystats.WithNearLimitRatio(set.NearLimitRatio),
		envoystats.WithExtraTags(st.ExtraTags),
		envoystats.WithFlushInterval(st.FlushInterval),
		envoystats.WithMaxDomains(set.MaxDetailedSeries))
	e.stats.Start()
	return e, nil
}

// metricsOption counts every decision in envoyproxy's stats too.
func (e *envoyStats) metricsOption() metrics.Option {
	if e == nil {
		return metrics.WithEnvoyStats(nil)
	}
	return metrics.WithEnvoyStats(e.stats)
}

// grpcOptions count and time every unary call per method
// (ratelimit_server.<Method>.*).
func (e *envoyStats) grpcOptions() []grpc.ServerOption {
	if e == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(e.stats.UnaryServerInterceptor())}
}

// handler is what PROMETHEUS_ADDR serves: ratelimitd's metrics and, with
// envoyproxy's stats mapped to Prometheus, those, flushed first so that a
// scrape reads current values (envoyproxy's lag up to STATS_FLUSH_INTERVAL).
func (e *envoyStats) handler(m *metrics.Metrics) http.Handler {
	if e == nil || e.prom == nil {
		return m.Handler()
	}
	h := promhttp.HandlerFor(prometheus.Gatherers{m.Registry(), e.prom.Gatherer()}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.stats.Flush()
		h.ServeHTTP(w, r)
	})
}

// addLocalCache exports the local cache's gauges under envoyproxy's names
// (ratelimit.localcache.*), set at every flush.
func (e *envoyStats) addLocalCache(c envoystats.LocalCache) {
	if e != nil {
		e.stats.AddLocalCache(c)
	}
}

// close stops the periodic flush and sends what is left.
func (e *envoyStats) close() {
	if e != nil {
		e.stats.Close()
	}
}
