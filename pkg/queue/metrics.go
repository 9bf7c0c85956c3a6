package queue

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OverflowLabel is the queue label of every queue beyond the tracked ones.
const OverflowLabel = "_other"

// Metrics exports, per queue, depth, in-flight count, oldest-due lag (read
// from the store at scrape time) and redeliveries. Only the first maxQueues
// queue names seen get their own label; counters of later ones add up under
// OverflowLabel and their gauges are not exported, so a client inventing
// queue names cannot grow the series without bound.
type Metrics struct {
	store     Store
	maxQueues int
	timeout   time.Duration

	mu      sync.Mutex
	tracked map[string]bool
	order   []string

	redeliveries *prometheus.CounterVec
	claims       *prometheus.CounterVec
	depth        *prometheus.Desc
	inFlight     *prometheus.Desc
	lag          *prometheus.Desc
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics reads gauges from st at scrape time, each scrape bounded by timeout.
func NewMetrics(st Store, maxQueues int, timeout time.Duration) *Metrics {
	label := []string{"queue"}
	return &Metrics{
		store: st, maxQueues: maxQueues, timeout: timeout, tracked: map[string]bool{},
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimitd", Subsystem: "queue", Name: "redeliveries_total",
			Help: "Messages handed out again (attempt > 1) after a visibility timeout or a nack.",
		}, label),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimitd", Subsystem: "queue", Name: "claimed_total",
			Help: "Messages handed out by Claim.",
		}, label),
		depth:    prometheus.NewDesc("ratelimitd_queue_depth", "Messages waiting (due or not).", label, nil),
		inFlight: prometheus.NewDesc("ratelimitd_queue_in_flight", "Messages claimed and not yet acked.", label, nil),
		lag:      prometheus.NewDesc("ratelimitd_queue_oldest_due_lag_seconds", "How long the oldest due message has waited past its due time.", label, nil),
	}
}

// label tracks name if there is room and returns its label.
func (m *Metrics) label(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tracked[name] {
		return name
	}
	if len(m.order) >= m.maxQueues {
		return OverflowLabel
	}
	m.tracked[name] = true
	m.order = append(m.order, name)
	return name
}

func (m *Metrics) seen(name string) {
	if m != nil {
		m.label(name)
	}
}

func (m *Metrics) claimed(name string, msgs []Message) {
	if m == nil || len(msgs) == 0 {
		return
	}
	l := m.label(name)
	m.claims.WithLabelValues(l).Add(float64(len(msgs)))
	for _, msg := range msgs {
		if msg.Attempt > 1 {
			m.redeliveries.WithLabelValues(l).Inc()
		}
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.redeliveries.Describe(ch)
	m.claims.Describe(ch)
	ch <- m.depth
	ch <- m.inFlight
	ch <- m.lag
}

// Collect implements prometheus.Collector; a queue whose stats cannot be
// read within the timeout is left out of this scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.redeliveries.Collect(ch)
	m.claims.Collect(ch)
	m.mu.Lock()
	names := append([]string(nil), m.order...)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	for _, name := range names {
		st, err := m.store.Stats(ctx, name)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(st.Depth), name)
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(st.InFlight), name)
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, st.OldestDueLag.Seconds(), name)
	}
}
