package metrics

import "github.com/prometheus/client_golang/prometheus"

// AddNoticeErrors exports ratelimitd_local_cache_notice_errors_total{op}:
// notices of counters that may have room again (redisstore's refunds.go)
// that could not be published (op "publish"), and failures of the
// subscription that hears them (op "subscribe"). It returns what counts
// one, and fails if they were already added.
func (m *Metrics) AddNoticeErrors() (func(op string), error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Subsystem: "local_cache", Name: "notice_errors_total",
		Help: "Local cache notices (a refund, undo, lease return or reset that may lift other replicas' cached denials) not published, and failures of the subscription that hears them, by op (publish, subscribe)."},
		[]string{"op"})
	// Both series from the start, so that an alert sees them at 0.
	c.WithLabelValues("publish")
	c.WithLabelValues("subscribe")
	if err := m.register(c); err != nil {
		return nil, err
	}
	return func(op string) { c.WithLabelValues(op).Inc() }, nil
}
