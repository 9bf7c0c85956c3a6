package admin

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics' domain label comes from the config (a reset counts only when a
// configured rule matched), never from arbitrary request text.
type metrics struct {
	resets        *prometheus.CounterVec
	resetCounters *prometheus.CounterVec
	denied        *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimitd_admin_resets_total",
			Help: "Counters API Reset calls that matched at least one counted rule, by domain.",
		}, []string{"domain"}),
		resetCounters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimitd_admin_reset_counters_total",
			Help: "Counters that existed and were deleted by a Reset, by domain.",
		}, []string{"domain"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimitd_admin_unauthenticated_total",
			Help: "Counters API calls refused for a missing or wrong credential, by transport (grpc, http).",
		}, []string{"transport"}),
	}
}

// Register adds the counters API's metrics to reg.
func (s *Server) Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{s.metrics.resets, s.metrics.resetCounters, s.metrics.denied} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("admin metrics: %w", err)
	}
	return nil
}
