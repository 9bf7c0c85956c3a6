package envoystats

import (
	_ "embed"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/statsd_exporter/pkg/event"
	"github.com/prometheus/statsd_exporter/pkg/exporter"
	"github.com/prometheus/statsd_exporter/pkg/mapper"
	"github.com/prometheus/statsd_exporter/pkg/registry"
)

//go:embed default_mapper.yaml
var defaultMapping string

// DefaultMapping is the statsd_exporter mapping applied without
// PROMETHEUS_MAPPER_YAML: envoyproxy's, with the response time in seconds
// unless responseTimeMillis.
func DefaultMapping(responseTimeMillis bool) string {
	scale := "scale: 0.001"
	if responseTimeMillis {
		scale = "# no scale: milliseconds (PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS)"
	}
	return strings.Replace(defaultMapping, "#SCALE", scale, 1)
}

// Prometheus is envoyproxy's USE_PROMETHEUS sink: every stat becomes a
// statsd_exporter event, mapped by statsd_exporter's own mapper and
// exporter into a registry of its own, as envoyproxy's sink does. Counters
// and gauges go through the exporter at each flush; a timer value (one per
// call) goes straight to the histogram or summary the exporter's registry
// builds for its mapping, so that a call costs an observation, not an event.
type Prometheus struct {
	reg    *prometheus.Registry
	mapper *mapper.MetricMapper
	exp    *exporter.Exporter
	events chan event.Events
	done   chan struct{}

	mu      sync.Mutex // guards pending and closed
	pending event.Events
	closed  bool

	timers  sync.Map   // statsd name -> *timer
	timerMu sync.Mutex // serializes building timers
}

// timer is one timer name resolved through the mapping: nil obs when the
// mapping drops it or its metric conflicts with another.
type timer struct {
	obs   prometheus.Observer
	scale float64
	// reresolve: the mapping has a TTL, so the exporter may remove the
	// metric; look it up on every value instead of keeping it.
	reresolve bool
}

// NewPrometheus loads the mapping (mapperFile, or DefaultMapping) and starts
// the exporter. A mapping that does not load is an error, as it fails
// statsd_exporter's start.
func NewPrometheus(mapperFile string, responseTimeMillis bool) (*Prometheus, error) {
	p := &Prometheus{reg: prometheus.NewRegistry(), events: make(chan event.Events), done: make(chan struct{})}
	p.mapper = &mapper.MetricMapper{Registerer: p.reg, Logger: slog.New(slog.DiscardHandler)}
	var err error
	if mapperFile != "" {
		err = p.mapper.InitFromFile(mapperFile)
	} else {
		err = p.mapper.InitFromYAMLString(DefaultMapping(responseTimeMillis))
	}
	if err != nil {
		return nil, fmt.Errorf("statsd mapping %s: %w", orDefault(mapperFile), err)
	}
	p.exp = newExporter(p.reg, p.mapper)
	p.reg.MustRegister(gcCPUFraction())
	go func() {
		defer close(p.done)
		p.exp.Listen(p.events)
	}()
	return p, nil
}

func orDefault(file string) string {
	if file == "" {
		return "(built-in)"
	}
	return file
}

// newExporter is statsd_exporter's exporter with its own counters
// (statsd_exporter_*, as envoyproxy's sink exports them) on reg, and a
// registry the timers share with it.
func newExporter(reg *prometheus.Registry, m *mapper.MetricMapper) *exporter.Exporter {
	counterVec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		reg.MustRegister(c)
		return c
	}
	unmapped := prometheus.NewCounter(prometheus.CounterOpts{Name: "statsd_exporter_events_unmapped_total", Help: "The total number of StatsD events no mapping was found for."})
	metricsCount := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "statsd_exporter_metrics_total", Help: "The total number of metrics."}, []string{"type"})
	reg.MustRegister(unmapped, metricsCount)
	exp := exporter.NewExporter(reg, m, slog.New(slog.DiscardHandler),
		counterVec("statsd_exporter_events_actions_total", "The total number of StatsD events by action.", "action"),
		unmapped,
		counterVec("statsd_exporter_events_error_total", "The total number of StatsD events discarded due to errors.", "reason"),
		counterVec("statsd_exporter_events_total", "The total number of StatsD events seen.", "type"),
		counterVec("statsd_exporter_events_conflict_total", "The total number of StatsD events with conflicting names.", "type"),
		metricsCount)
	exp.Registry = &lockedRegistry{r: registry.NewRegistry(reg, m)}
	return exp
}

// Gatherer is the registry the mapped metrics are in.
func (p *Prometheus) Gatherer() prometheus.Gatherer { return p.reg }

// FlushCounter queues a counter event for the next Flush.
func (p *Prometheus) FlushCounter(name string, v uint64) {
	p.queue(&event.CounterEvent{CMetricName: name, CValue: float64(v), CLabels: map[string]string{}})
}

// FlushGauge queues a gauge event for the next Flush.
func (p *Prometheus) FlushGauge(name string, v uint64) {
	p.queue(&event.GaugeEvent{GMetricName: name, GValue: float64(v), GLabels: map[string]string{}})
}

func (p *Prometheus) queue(e event.Event) {
	p.mu.Lock()
	p.pending = append(p.pending, e)
	p.mu.Unlock()
}

// Flush hands the queued events to the exporter and returns once it has
// applied them, so that a scrape after Flush reads them.
func (p *Prometheus) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if len(p.pending) > 0 {
		p.events <- p.pending
		p.pending = nil
	}
	// The exporter handles batches one after the other: once it takes
	// this empty one, it is done with the last.
	p.events <- nil
}

func (p *Prometheus) close() {
	p.Flush()
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.events)
	}
	p.mu.Unlock()
	<-p.done
}

// FlushTimer observes one timer value (milliseconds) in the metric its
// mapping names, scaled as the mapping says.
func (p *Prometheus) FlushTimer(name string, v float64) {
	var t *timer
	if cached, ok := p.timers.Load(name); ok {
		t = cached.(*timer)
	} else {
		t = p.resolveTimer(name)
	}
	if t.obs != nil {
		t.obs.Observe(v * t.scale)
	}
}

// resolveTimer does for a timer name what the exporter does for an
// observer event: map it, then get its histogram or summary from the
// registry, built with the mapping's buckets or quantiles.
func (p *Prometheus) resolveTimer(name string) *timer {
	p.timerMu.Lock()
	defer p.timerMu.Unlock()
	if cached, ok := p.timers.Load(name); ok && !cached.(*timer).reresolve {
		return cached.(*timer)
	}
	mapping, labels, present := p.mapper.GetMapping(name, mapper.MetricTypeObserver)
	if mapping == nil {
		mapping = &mapper.MetricMapping{Ttl: p.mapper.Defaults.Ttl}
	}
	t := &timer{scale: 1, reresolve: mapping.Ttl > 0}
	if mapping.Action == mapper.ActionTypeDrop || (present && mapping.Name == "") {
		p.timers.Store(name, t)
		return t
	}
	metric := mapper.EscapeMetricName(name)
	if present {
		metric = mapper.EscapeMetricName(mapping.Name)
	}
	if labels == nil {
		labels = prometheus.Labels{}
	}
	if mapping.Scale.Set {
		t.scale = mapping.Scale.Val
	}
	help := "Metric autogenerated by statsd_exporter."
	if mapping.HelpText != "" {
		help = mapping.HelpText
	}
	kind := mapping.ObserverType
	if kind == mapper.ObserverTypeDefault {
		kind = p.mapper.Defaults.ObserverType
	}
	var err error
	if kind == mapper.ObserverTypeHistogram {
		t.obs, err = p.exp.Registry.GetHistogram(metric, labels, help, mapping, p.exp.MetricsCount)
	} else {
		t.obs, err = p.exp.Registry.GetSummary(metric, labels, help, mapping, p.exp.MetricsCount)
	}
	if err != nil {
		p.exp.ConflictingEventStats.WithLabelValues("observer").Inc()
		t.obs = nil
	}
	p.timers.Store(name, t)
	return t
}

// lockedRegistry lets the exporter's goroutine and the timers share
// statsd_exporter's registry, which is not safe for concurrent use.
type lockedRegistry struct {
	mu sync.Mutex
	r  *registry.Registry
}

var _ exporter.Registry = (*lockedRegistry)(nil)

func (l *lockedRegistry) GetCounter(name string, labels prometheus.Labels, help string, m *mapper.MetricMapping, count *prometheus.GaugeVec) (prometheus.Counter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.GetCounter(name, labels, help, m, count)
}

func (l *lockedRegistry) GetGauge(name string, labels prometheus.Labels, help string, m *mapper.MetricMapping, count *prometheus.GaugeVec) (prometheus.Gauge, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.GetGauge(name, labels, help, m, count)
}

func (l *lockedRegistry) GetHistogram(name string, labels prometheus.Labels, help string, m *mapper.MetricMapping, count *prometheus.GaugeVec) (prometheus.Observer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.GetHistogram(name, labels, help, m, count)
}

func (l *lockedRegistry) GetSummary(name string, labels prometheus.Labels, help string, m *mapper.MetricMapping, count *prometheus.GaugeVec) (prometheus.Observer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.GetSummary(name, labels, help, m, count)
}

func (l *lockedRegistry) RemoveStaleMetrics() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.RemoveStaleMetrics()
}
