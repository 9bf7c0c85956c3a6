package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
)

// breakerCollector exports one Redis client's per-node breakers: which are
// open (calls to that node answered UNAVAILABLE at once) and how many calls
// each refused. The limiter and the delay queue have a client each, told
// apart by the client label.
type breakerCollector struct {
	states        func() []redisconn.BreakerState
	open, refused *prometheus.Desc
}

// watchBreakers registers the breakers states reports (a breaker set's
// States) as client's ("limiter" or "queue") on m's registry.
func watchBreakers(m *metrics.Metrics, client string, states func() []redisconn.BreakerState) error {
	labels := prometheus.Labels{"client": client}
	return m.Registry().Register(&breakerCollector{
		states: states,
		open: prometheus.NewDesc("ratelimitd_redis_breaker_open",
			"1 while the node's circuit breaker is open: calls that need the node are answered UNAVAILABLE at once until a probe PING answers.",
			[]string{"node"}, labels),
		refused: prometheus.NewDesc("ratelimitd_redis_breaker_refused_total",
			"Calls the node's open circuit breaker answered at once, without Redis.",
			[]string{"node"}, labels),
	})
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.refused
}

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.states() {
		open := 0.0
		if st.Open {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open, st.Node)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Refused), st.Node)
	}
}

// logBreakerChange logs each change of a node's breaker once, at WARN both
// ways, so that an operator at the default level sees it close too.
func logBreakerChange(log *zap.Logger, client string) func(node string, open bool) {
	log = log.With(zap.String("client", client))
	return func(node string, open bool) {
		if open {
			log.Warn("redis node down: circuit breaker open, calls to it fail at once until it answers a PING", zap.String("node", node))
			return
		}
		log.Warn("redis node answers again: circuit breaker closed", zap.String("node", node))
	}
}
