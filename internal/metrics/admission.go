package metrics

import "github.com/prometheus/client_golang/prometheus"

// Admission is what the service reports of the decisions it admits
// (MAX_CONCURRENT_REQUESTS, REQUEST_TIMEOUT); *service.Service is one.
type Admission interface {
	Admission() (inFlight int64, rejected, timedOut uint64)
}

// AddAdmission exports a's figures as ratelimitd_requests_in_flight,
// ratelimitd_requests_overloaded_total and
// ratelimitd_request_timeouts_total. It fails if they were added already.
func (m *Metrics) AddAdmission(a Admission) error {
	return m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ratelimitd", Name: "requests_in_flight",
			Help: "ShouldRateLimit calls (gRPC and /json) being decided."},
			func() float64 { n, _, _ := a.Admission(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "requests_overloaded_total",
			Help: "Calls refused with RESOURCE_EXHAUSTED because MAX_CONCURRENT_REQUESTS decisions were in progress."},
			func() float64 { _, n, _ := a.Admission(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "request_timeouts_total",
			Help: "Decisions answered UNAVAILABLE because REQUEST_TIMEOUT passed while Redis had not answered."},
			func() float64 { _, _, n := a.Admission(); return float64(n) }),
	)
}
