package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
)

// localMetrics count what on_store_error: local does (pkg/store/fallback),
// by rule: labelled by the rule's stats key, never by a request's values,
// and only counted while Redis is down or just after.
type localMetrics struct {
	decisions, reconciled, dropped *prometheus.CounterVec
}

func newLocalMetrics() localMetrics {
	rule := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ratelimitd", Subsystem: "local", Name: name, Help: help}, []string{"domain", "rule"})
	}
	return localMetrics{
		decisions:  rule("decisions_total", "Descriptors of an on_store_error: local rule decided in this replica's memory, with its share of the limit, because Redis could not decide them."),
		reconciled: rule("reconciled_hits_total", "Hits admitted locally charged to Redis once it answered again (with, after Redis lost its data, the replica's share of what it had counted before)."),
		dropped:    rule("dropped_hits_total", "Hits admitted locally never charged to Redis: their window ended first, or Redis may have counted them already (a call that failed after it was sent)."),
	}
}

func (l localMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.decisions, l.reconciled, l.dropped}
}

// localDecision counts a descriptor of h's rule decided locally.
func (m *Metrics) localDecision(h *Hit) {
	domain, rule := h.Domain, h.StatKey
	if h.Rule != nil {
		domain, rule = h.Rule.Domain, h.Rule.StatKey
	}
	m.local.decisions.WithLabelValues(validUTF8(domain), validUTF8(rule)).Inc()
}

// LocalReconciled counts hits of a rule's counter charged to Redis after
// an outage; domain and rule are "" for a counter no rule in force has.
func (m *Metrics) LocalReconciled(domain, rule string, hits uint64) {
	m.local.reconciled.WithLabelValues(validUTF8(domain), validUTF8(rule)).Add(float64(hits))
}

// LocalDropped counts hits admitted locally that Redis never gets.
func (m *Metrics) LocalDropped(domain, rule string, hits uint64) {
	m.local.dropped.WithLabelValues(validUTF8(domain), validUTF8(rule)).Add(float64(hits))
}

// Fallback is what the on_store_error: local decorator reports.
type Fallback interface {
	Stats() fallback.Stats
}

// AddFallback exports f's gauges: ratelimitd_local_replicas, the number a
// limit is shared by now, and ratelimitd_local_keys, the counters decided
// locally now. It fails if one was already added.
func (m *Metrics) AddFallback(f Fallback) error {
	gauge := func(name, help string, pick func(fallback.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ratelimitd", Subsystem: "local", Name: name, Help: help},
			func() float64 { return float64(pick(f.Stats())) })
	}
	return m.register(
		gauge("replicas", "Replicas an on_store_error: local limit is shared by: those seen live through Redis, or LOCAL_FALLBACK_REPLICAS before another was seen.",
			func(s fallback.Stats) int { return s.Replicas }),
		gauge("keys", "Counters decided in this replica's memory now, their hits not yet charged back to Redis.",
			func(s fallback.Stats) int { return s.Keys }),
	)
}

func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
