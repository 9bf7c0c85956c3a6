// Package metrics is ratelimitd's Prometheus instrumentation: envoyproxy's
// per-rule stats (total_hits, over_limit, near_limit, within_limit,
// shadow_mode, over_limit_with_local_cache) plus config loads, backend
// errors and latency histograms, on a registry of its own.
//
// Label values come from the config (domain and the rule's stats key),
// except for rules with detailed_metric or value_to_metric, whose keys carry
// request values; those are capped so that an attacker sending unique values
// cannot grow memory: past the cap, hits count under "<stats key>_overflow".
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratelimitd/ratelimitd/internal/envoystats"
)

// DefaultDetailedSeries caps the distinct request-derived rule labels.
const DefaultDetailedSeries = 1000

// Metrics holds every collector. Use New.
type Metrics struct {
	reg *prometheus.Registry

	totalHits, overLimit, nearLimit, withinLimit, shadowMode, overLimitLocalCache, usageOverLimit, negativeHits *prometheus.CounterVec

	configLoads   *prometheus.CounterVec
	backendErrors *prometheus.CounterVec
	storeAnswers  *prometheus.CounterVec
	requests      *prometheus.HistogramVec
	roundTrips    *prometheus.HistogramVec
	// requestOK and roundTripOK are the children nearly every call
	// observes, resolved at first use: WithLabelValues hashes the label and
	// locks the vector on every call.
	requestOK, roundTripOK atomic.Pointer[prometheus.Observer]
	undoFailures           prometheus.Counter
	local                  localMetrics

	nearRatio   float64
	maxDetailed int64
	detailed    atomic.Int64
	rules       sync.Map // ruleKey -> *ruleCounters
	overflows   sync.Map // ruleKey{domain, statKey} -> its _overflow counters

	// envoy receives envoyproxy's stats (WithEnvoyStats); nil without.
	envoy *envoystats.Stats
}

type ruleKey struct{ domain, rule string }

// ruleCounters are one rule's resolved counters, so the hot path does one
// map lookup instead of six label hashes.
type ruleCounters struct {
	owner                                                             *Metrics
	total, over, near, within, shadow, overCache, usageOver, negative prometheus.Counter
	envoy                                                             *envoystats.Rule // nil without envoyproxy's stats
}

// Option configures Metrics.
type Option func(*Metrics)

// WithNearLimitRatio is NEAR_LIMIT_RATIO (default 0.8): admitted hits past
// this fraction of the capacity count as near_limit.
func WithNearLimitRatio(r float64) Option { return func(m *Metrics) { m.nearRatio = r } }

// WithMaxDetailedSeries caps request-derived rule labels (default 1000).
func WithMaxDetailedSeries(n int) Option { return func(m *Metrics) { m.maxDetailed = int64(n) } }

// New registers every collector on a new registry, with the Go and process
// collectors: the daemon serves that registry alone on /metrics.
func New(opts ...Option) *Metrics {
	m := build(opts)
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(m.collectors()...)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register puts the service's collectors on reg, for a program that embeds
// the service (pkg/service) and serves a registry of its own. The Go and
// process collectors stay out: such a registry usually has them already, and
// a second copy would fail to register. The result only observes: Handler,
// Registry and the Add methods need New's registry.
func Register(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	if own, ok := reg.(ownRegistry); ok {
		return own.m, nil
	}
	m := build(opts)
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			// Leave reg as it was, so that a caller may retry or go on
			// without metrics.
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return m, nil
}

// build makes every collector, registered nowhere yet.
func build(opts []Option) *Metrics {
	m := &Metrics{nearRatio: 0.8, maxDetailed: DefaultDetailedSeries}
	for _, opt := range opts {
		opt(m)
	}
	rule := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Name: name, Help: help}, []string{"domain", "rule"})
	}
	m.totalHits = rule("total_hits_total", "Hits (hits_addend) against a rule.")
	m.overLimit = rule("over_limit_total", "Hits denied as over the rule's limit (shadow mode included).")
	m.nearLimit = rule("near_limit_total", "Admitted hits past NEAR_LIMIT_RATIO of the rule's capacity.")
	m.withinLimit = rule("within_limit_total", "Admitted hits.")
	m.shadowMode = rule("shadow_mode_total", "Hits over the limit of a shadow_mode rule (answered OK).")
	m.overLimitLocalCache = rule("over_limit_with_local_cache_total", "Hits denied by the local over-limit cache, without the backend.")
	m.usageOverLimit = rule("usage_over_limit_total", "Usage hits (a descriptor's own hits_addend, such as LLM tokens) recorded although they took the rule past its limit.")
	m.negativeHits = rule("negative_hits_total", "Hits given back to a rule's counter (is_negative_hits refunds), as asked: a refund never takes a counter below fresh.")
	m.configLoads = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "config_load_total",
		Help: "Config loads by result (success, error); a failed load keeps the previous config."}, []string{"result"})
	m.backendErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "backend_errors_total",
		Help: "Decisions the backend could not make, by kind (unavailable, deadline, canceled)."}, []string{"kind"})
	m.storeAnswers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "store_error_answers_total",
		Help: "Requests the backend failed to decide that their rules' on_store_error answered, by answer (allow: OK, deny: OVER_LIMIT)."}, []string{"answer"})
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "ratelimitd", Name: "should_rate_limit_duration_seconds",
		Help: "ShouldRateLimit latency by gRPC code.", Buckets: latencyBuckets()}, []string{"code"})
	m.roundTrips = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "ratelimitd", Name: "redis_round_trip_seconds",
		Help: "One Redis script call (all descriptors of a request), by result.", Buckets: latencyBuckets()}, []string{"result"})
	m.local = newLocalMetrics()
	m.undoFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimitd", Name: "redis_undo_failures_total",
		Help: "Denied cross-slot Redis Cluster requests whose undo failed: their hits stay charged until the window passes or the bucket refills."})
	return m
}

// collectors are the service's own collectors, in one list for New and
// Register.
func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.undoFailures, m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		m.overLimitLocalCache, m.usageOverLimit, m.negativeHits, m.configLoads, m.backendErrors, m.storeAnswers, m.requests, m.roundTrips},
		m.local.collectors()...)
}

// latencyBuckets run from 50µs (an in-memory decision) to 2.5s.
func latencyBuckets() []float64 {
	return prometheus.ExponentialBuckets(50e-6, 2.5, 12)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is for tests and for adding collectors (e.g. the local cache).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Registerer is New's registry, on which Register returns m itself: how the
// daemon gives its metrics to pkg/service's WithMetrics.
func (m *Metrics) Registerer() prometheus.Registerer { return ownRegistry{m.reg, m} }

type ownRegistry struct {
	*prometheus.Registry
	m *Metrics
}

// ConfigLoad counts one load attempt.
func (m *Metrics) ConfigLoad(err error) {
	if m.envoy != nil {
		m.envoy.ConfigLoad(err)
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.configLoads.WithLabelValues(result).Inc()
}

// BackendError counts a decision the backend could not make (envoyproxy's
// should_rate_limit.redis_error).
func (m *Metrics) BackendError(kind string) {
	if m.envoy != nil {
		m.envoy.RedisError()
	}
	m.backendErrors.WithLabelValues(kind).Inc()
}

// StoreErrorAnswer counts a request answered from on_store_error.
func (m *Metrics) StoreErrorAnswer(answer string) { m.storeAnswers.WithLabelValues(answer).Inc() }

// Request observes one ShouldRateLimit.
func (m *Metrics) Request(code string, d time.Duration) {
	if code != "OK" {
		m.requests.WithLabelValues(code).Observe(d.Seconds())
		return
	}
	child(&m.requestOK, m.requests, code).Observe(d.Seconds())
}

// child is vec's child of label, kept in p once resolved.
func child(p *atomic.Pointer[prometheus.Observer], vec *prometheus.HistogramVec, label string) prometheus.Observer {
	if o := p.Load(); o != nil {
		return *o
	}
	o := vec.WithLabelValues(label)
	p.Store(&o)
	return o
}

// RoundTrip observes one Redis script call.
func (m *Metrics) RoundTrip(d time.Duration, err error) {
	if err != nil {
		m.roundTrips.WithLabelValues("error").Observe(d.Seconds())
		return
	}
	child(&m.roundTripOK, m.roundTrips, "ok").Observe(d.Seconds())
}

// UndoFailed counts a denied cross-slot request whose undo failed.
func (m *Metrics) UndoFailed() { m.undoFailures.Inc() }
