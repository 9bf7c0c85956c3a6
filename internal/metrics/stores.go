package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// LocalCache is what the local over-limit cache (pkg/store/localcache)
// reports: batches answered from it, batches sent on to the backend,
// entries evicted to stay within its size, and keys invalidated.
type LocalCache interface {
	Stats() (hits, misses, evictions uint64)
	Invalidated() uint64
}

// AddLocalCache exports c's counters as ratelimitd_local_cache_*. It fails
// if a local cache was already added.
func (m *Metrics) AddLocalCache(c LocalCache) error {
	stat := func(name, help string, pick func(hits, misses, evictions uint64) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ratelimitd", Subsystem: "local_cache", Name: name, Help: help},
			func() float64 { return float64(pick(c.Stats())) })
	}
	return m.register(
		stat("hits_total", "Requests answered from the local over-limit cache.", func(h, _, _ uint64) uint64 { return h }),
		stat("misses_total", "Requests the local cache sent to the backend.", func(_, m, _ uint64) uint64 { return m }),
		stat("evictions_total", "Entries evicted to keep the cache within LOCAL_CACHE_SIZE_IN_BYTES.", func(_, _, e uint64) uint64 { return e }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ratelimitd", Subsystem: "local_cache", Name: "invalidations_total",
			Help: "Keys whose cached denials were dropped because a refund, a Cluster undo, a lease's return or a counters API reset may have lifted them."},
			func() float64 { return float64(c.Invalidated()) }),
	)
}

// MemStore is what the embedded store (pkg/store/memstore) reports.
type MemStore interface {
	Len() int
	Evictions() uint64
	Expired() uint64
}

// AddMemStore exports the embedded store's size and what it dropped as
// ratelimitd_memstore_*: evictions mean MEMORY_MAX_KEYS is too small for the
// traffic. It fails if an embedded store was already added.
func (m *Metrics) AddMemStore(s MemStore) error {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "ratelimitd", Subsystem: "memstore", Name: name, Help: help}
	}
	return m.register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("keys", "Keys held by the embedded store, expired ones not yet swept included.")),
			func() float64 { return float64(s.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("evictions_total", "Live keys dropped to stay within MEMORY_MAX_KEYS.")),
			func() float64 { return float64(s.Evictions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("expired_total", "Expired keys dropped, by the background sweep or to make room.")),
			func() float64 { return float64(s.Expired()) }),
	)
}

// register adds cs all or none, so a failed Add leaves the registry as it
// was.
func (m *Metrics) register(cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := m.reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				m.reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// Leases is what the lease decorator (pkg/store/lease) reports.
type Leases interface {
	Stats() lease.Stats
}

// AddLeases exports the lease decorator's counters as ratelimitd_lease_*
// (docs/leases.md). It fails if leases were already added.
func (m *Metrics) AddLeases(l Leases) error {
	return m.register(newLeaseCollector(l))
}

// leaseCollector exports every lease metric from one Stats call per
// scrape: Stats takes all 64 shard locks, once per call.
type leaseCollector struct {
	l       Leases
	metrics []leaseMetric
}

type leaseMetric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	pick func(lease.Stats) uint64
}

func newLeaseCollector(l Leases) *leaseCollector {
	m := func(name, help string, kind prometheus.ValueType, pick func(lease.Stats) uint64) leaseMetric {
		return leaseMetric{desc: prometheus.NewDesc(prometheus.BuildFQName("ratelimitd", "lease", name), help, nil, nil), kind: kind, pick: pick}
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	return &leaseCollector{l: l, metrics: []leaseMetric{
		m("blocks_total", "Blocks of counters leased from the backend.", counter, func(s lease.Stats) uint64 { return s.Blocks }),
		m("refills_total", "Blocks the sweeper took ahead for window leases running low (part of blocks_total).", counter, func(s lease.Stats) uint64 { return s.Refills }),
		m("local_hits_total", "Hits answered from a leased block, without the backend.", counter, func(s lease.Stats) uint64 { return s.LocalHits }),
		m("returned_hits_total", "Unused hits of ended leases given back to the backend.", counter, func(s lease.Stats) uint64 { return s.Returned }),
		m("lapsed_hits_total", "Unused hits that ended without a return: bucket slots, window ends, failed returns, counters reset.", counter, func(s lease.Stats) uint64 { return s.Lapsed }),
		m("return_errors_total", "Returns of unused hits the backend failed (their hits are lapsed).", counter, func(s lease.Stats) uint64 { return s.ReturnErrors }),
		m("outstanding_hits", "Unused hits held in leases now: what a crash of this replica would leave charged.", gauge, func(s lease.Stats) uint64 { return s.Outstanding }),
	}}
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.l.Stats()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.pick(st)))
	}
}
