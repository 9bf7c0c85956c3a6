package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
)

// LocalCache is what the local over-limit cache (pkg/store/localcache)
// reports: batches answered from it, batches sent on to the backend, and
// entries evicted to stay within its size.
type LocalCache interface {
	Stats() (hits, misses, evictions uint64)
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
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "ratelimitd", Subsystem: "lease", Name: name, Help: help}
	}
	counter := func(name, help string, pick func(lease.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts(opts(name, help)), func() float64 { return float64(pick(l.Stats())) })
	}
	return m.register(
		counter("blocks_total", "Blocks of counters leased from the backend.", func(s lease.Stats) uint64 { return s.Blocks }),
		counter("refills_total", "Blocks the sweeper took ahead for window leases running low (part of blocks_total).", func(s lease.Stats) uint64 { return s.Refills }),
		counter("local_hits_total", "Hits answered from a leased block, without the backend.", func(s lease.Stats) uint64 { return s.LocalHits }),
		counter("returned_hits_total", "Unused hits of ended leases given back to the backend.", func(s lease.Stats) uint64 { return s.Returned }),
		counter("lapsed_hits_total", "Unused hits that ended without a return: bucket slots, window ends, failed returns.", func(s lease.Stats) uint64 { return s.Lapsed }),
		counter("return_errors_total", "Returns of unused hits the backend failed (their hits are lapsed).", func(s lease.Stats) uint64 { return s.ReturnErrors }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("outstanding_hits", "Unused hits held in leases now: what a crash of this replica would leave charged.")),
			func() float64 { return float64(l.Stats().Outstanding) }),
	)
}
