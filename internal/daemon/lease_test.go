package daemon

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

var hotLimit = algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10000, Period: time.Minute}

// fixedClockStore is a memstore on a fixed clock at the start of a minute
// (storetest.Epoch): the tests below count hits of hotLimit's one-minute
// window, which on the wall clock could end between two of their calls.
// The lease decorator keeps the real clock; it reads the backend's
// ResetAfter as a duration, so its blocks last a minute, longer than any of
// these tests.
func fixedClockStore() *memstore.Store {
	return memstore.New(memstore.WithClock(storetest.Epoch))
}

// closeCounting is a memstore that counts Close calls and reads what the
// hot counter had left when it was closed.
type closeCounting struct {
	*memstore.Store
	closes int
	left   uint64
}

func (c *closeCounting) Close() error {
	c.closes++
	res, err := c.Take(context.Background(), []store.Request{{Key: "l:k", Limit: hotLimit, Mode: algorithms.Enforce}})
	if err != nil {
		return err
	}
	c.left = res[0].Remaining
	return c.Store.Close()
}

// newLeaseGate is the daemon's lease gate over next, which the tests choose
// (a memstore on a fixed clock) where the stack would put Redis.
func newLeaseGate(next store.Lender, l leaseSettings, log *zap.Logger) *leaseGate {
	return &leaseGate{Store: lease.New(next, leaseOptions(l)...), log: log}
}

func leaseCfg(t *testing.T, body string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "l.yaml", Data: []byte("domain: l\ndescriptors:\n" + body)}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const (
	plainRule  = "  - {key: k, rate_limit: {unit: minute, requests_per_unit: 10000}}\n"
	leasedRule = "  - {key: k, lease: true, rate_limit: {unit: minute, requests_per_unit: 10000}}\n"
	lowerRule  = "  - {key: k, lease: true, rate_limit: {unit: minute, requests_per_unit: 5000}}\n"
)

// hot takes n single hits of one leased fixed-window counter.
func hot(t *testing.T, st store.Store, n int) {
	t.Helper()
	op := store.Request{Key: "l:k", Limit: hotLimit, Hits: 1, Mode: algorithms.Enforce, Lease: true}
	for i := range n {
		res, err := st.Take(context.Background(), []store.Request{op})
		if err != nil || !res[0].Allowed {
			t.Fatalf("take %d: %+v, %v", i, res, err)
		}
	}
}

// TestLeaseGate: the daemon's wiring of the lease decorator. The first
// config with a leasing rule (or any under LEASE_ENABLED) is announced
// once, a config whose rules changed ends every lease, and Close gives the
// leases back before the backend closes.
func TestLeaseGate(t *testing.T) {
	tests := []struct {
		name      string
		global    bool
		cfgs      []string // configs put in force in turn
		announced bool     // "leases on" was logged (once)
		// returned: a lease taken before the last config was given back
		// when it came into force.
		returned bool
	}{
		{"no leasing rule", false, []string{plainRule}, false, false},
		{"LEASE_ENABLED", true, []string{plainRule}, true, false},
		{"a lease: true rule", false, []string{leasedRule}, true, false},
		{"a reload brings the first leasing rule", false, []string{plainRule, leasedRule}, true, true},
		{"a reload that changes no rule keeps the leases", false, []string{leasedRule, leasedRule}, true, false},
		{"a reload that changes a rule returns the leases", false, []string{leasedRule, lowerRule}, true, true},
		{"a reload that drops lease: true returns the leases", false, []string{leasedRule, plainRule}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &closeCounting{Store: fixedClockStore()}
			core, logs := observer.New(zap.InfoLevel)
			gate := newLeaseGate(mem, defaultLeaseSettings(), zap.New(core))
			if err := metrics.New().AddLeases(gate); err != nil {
				t.Fatal(err)
			}
			for i, body := range tt.cfgs {
				if i == len(tt.cfgs)-1 {
					hot(t, gate, 50)
					if gate.Stats().Outstanding == 0 {
						t.Fatalf("no lease taken after 50 hits: %+v", gate.Stats())
					}
				}
				if err := gate.observe(leaseCfg(t, body), tt.global, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if n := logs.FilterMessageSnippet("leases on").Len(); n != map[bool]int{true: 1}[tt.announced] {
				t.Errorf(`"leases on" logged %d times, want it: %v`, n, tt.announced)
			}
			st := gate.Stats()
			if got := st.Returned > 0 && st.Outstanding == 0; got != tt.returned {
				t.Errorf("stats %+v: returned = %v, want %v", st, got, tt.returned)
			}
			if err := gate.Close(); err != nil {
				t.Fatal(err)
			}
			if st := gate.Stats(); st.Outstanding != 0 {
				t.Errorf("Close left %d hits outstanding: %+v", st.Outstanding, st)
			}
			if mem.closes != 1 {
				t.Errorf("backend closed %d times, want 1", mem.closes)
			}
		})
	}
}

// TestLeaseGateCloseReturnsBeforeTheBackendCloses: Close gives the unused
// hits back while the backend is open, so it holds only the hits admitted;
// after the shutdown's Stop too.
func TestLeaseGateCloseReturnsBeforeTheBackendCloses(t *testing.T) {
	for _, stopFirst := range []bool{false, true} {
		mem := &closeCounting{Store: fixedClockStore()}
		gate := newLeaseGate(mem, defaultLeaseSettings(), zap.NewNop())
		hot(t, gate, 100)
		if st := gate.Stats(); st.Outstanding == 0 || st.LocalHits == 0 {
			t.Fatalf("no lease in use after 100 hits: %+v", st)
		}
		if stopFirst {
			a := &app{leases: gate, log: zap.NewNop()}
			a.returnLeases(time.Now().Add(time.Minute))
		}
		if err := gate.Close(); err != nil {
			t.Fatal(err)
		}
		if want := hotLimit.Requests - 100; mem.left != want || mem.closes != 1 {
			t.Errorf("stop first %v: the backend had %d left when closed (%d times), want %d (stats %+v)", stopFirst, mem.left, mem.closes, want, gate.Stats())
		}
	}
}

// TestNewStoreLeases: the lease gate sits over Redis only, under the local
// cache and on_store_error: local's decorator; the embedded store never
// leases.
func TestNewStoreLeases(t *testing.T) {
	srv := redistest.Start(t)
	tests := []struct {
		name   string
		env    map[string]string
		gate   bool
		cached bool
	}{
		{"embedded store", map[string]string{"LEASE_ENABLED": "true"}, false, false},
		{"redis", map[string]string{"REDIS_URL": srv.Addr}, true, false},
		{"redis with LEASE_ENABLED", map[string]string{"REDIS_URL": srv.Addr, "LEASE_ENABLED": "true"}, true, false},
		{"redis with the local cache", map[string]string{"REDIS_URL": srv.Addr, "LEASE_ENABLED": "true", "LOCAL_CACHE_SIZE_IN_BYTES": "4096"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := parseSettings(nil, envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			m := metrics.New()
			st, gate, err := newStore(set, m, nil, zap.NewNop(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			if (gate != nil) != tt.gate {
				t.Fatalf("gate %v, want one: %v", gate, tt.gate)
			}
			_, lease := gathered(t, m)["ratelimitd_lease_local_hits_total"]
			if lease != tt.gate {
				t.Errorf("lease metrics exported: %v, want %v", lease, tt.gate)
			}
			if gate == nil {
				return
			}
			if st.Store != store.Store(st.Fallback) {
				t.Fatalf("store %T, want on_store_error: local's decorator outermost", st.Store)
			}
			if (st.Cache != nil) != tt.cached || gate.Store != st.Lease || st.Redis == nil {
				t.Fatalf("layers %+v, want a local cache: %v, and the lease gate over Redis", st, tt.cached)
			}
			if _, ok := st.Store.(store.Admin); !ok {
				t.Errorf("the stack's %T cannot reset or list: the counters API needs it", st.Store)
			}
			if _, ok := st.Store.(store.Lender); !ok {
				t.Errorf("the stack's %T cannot lend: RLQS needs it", st.Store)
			}
		})
	}
}

// gathered maps every unlabelled sample of m to its value.
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) == 0 {
				out[f.GetName()] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A counters API reset clears the keys from every decorator that remembers
// them: the local cache's denials and the lease gate's blocks (a block kept
// past the reset would admit hits no counter holds). The decorators pass
// Reset to the store under them and Forget to one another.
func TestAdminForgetsLeases(t *testing.T) {
	mem := fixedClockStore()
	t.Cleanup(func() { _ = mem.Close() })
	gate := newLeaseGate(mem, leaseSettings{Target: time.Second, MaxBlock: 1000, Fraction: 0.1, Idle: time.Minute, MaxAge: time.Minute, MaxKeys: 100}, zap.NewNop())
	hot(t, gate, 50)
	if gate.Stats().Outstanding == 0 {
		t.Fatal("no block held after 50 hits")
	}
	cache := localcache.New(gate, 1<<20)
	cache.Forget("l:k")
	if st := gate.Stats(); st.Outstanding != 0 {
		t.Fatalf("after the reset's Forget the gate still holds %d hits", st.Outstanding)
	}
	existed, err := cache.Reset(t.Context(), []string{"l:k"})
	if err != nil || len(existed) != 1 || !existed[0] {
		t.Fatalf("Reset through the decorators: existed %v, %v; want the memstore's counter deleted", existed, err)
	}
}
