package lease_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// Replicas under concurrent batches, sweeps and ReturnAll, within one
// window: once they close, the backend counts exactly the hits they
// admitted (every unused hit came back), never more than the limit.
func TestConcurrent(t *testing.T) {
	for _, lim := range leasing(windowLease, 3000, time.Hour) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch())
			mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
			defer mem.Close()
			var replicas [2]*lease.Store
			for i := range replicas {
				replicas[i] = lease.New(shared{mem}, lease.WithClock(clock.Now), lease.WithSweep(0),
					lease.WithIdle(50*time.Millisecond), lease.WithFraction(0.3))
			}
			keys := []string{"a", "b", "c"}
			admitted := map[string]*atomic.Uint64{}
			for _, k := range keys {
				admitted[k] = new(atomic.Uint64)
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() { hammer(t, clock, replicas[:], lim, keys, admitted, uint64(g)) })
			}
			wg.Wait()
			for _, r := range replicas {
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				if st := r.Stats(); st.Outstanding != 0 || st.Blocks == 0 || st.LocalHits == 0 {
					t.Fatalf("stats after Close %+v", st)
				}
			}
			rg := &rig{t: t, mem: mem}
			for _, k := range keys {
				n := admitted[k].Load()
				if got := rg.count(k, lim); got != n || n > lim.Requests {
					t.Errorf("%s: the backend counts %d, %d admitted (limit %d)", k, got, n, lim.Requests)
				}
			}
		})
	}
}

// hammer sends 1500 random batches over keys to random replicas, now and
// then a ReturnAll, a Sweep or a step of the clock, and counts the hits
// admitted per key.
func hammer(t *testing.T, clock *storetest.Clock, replicas []*lease.Store, lim algorithms.Limit, keys []string, admitted map[string]*atomic.Uint64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 1500 {
		r := replicas[rng.IntN(len(replicas))]
		var reqs []store.Request
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				reqs = append(reqs, hit(k, lim, 1+rng.Uint64N(3)))
			}
		}
		if len(reqs) == 0 {
			continue
		}
		res, err := r.Take(context.Background(), reqs)
		if err != nil {
			t.Error(err)
			return
		}
		if !store.VerdictOf(reqs, res).Denied() {
			for _, op := range reqs {
				admitted[op.Key].Add(op.Hits)
			}
		}
		switch rng.IntN(200) {
		case 0:
			_ = r.ReturnAll(context.Background())
		case 1:
			_ = r.Sweep(clock.Now())
		case 2, 3, 4:
			clock.Advance(10 * time.Millisecond)
		}
	}
}

// The local path allocates the results and nothing else.
func TestLocalAllocations(t *testing.T) {
	r := newRig(t, lease.WithMaxBlock(1000), lease.WithFraction(1))
	lim := fixed(1e9, time.Hour)
	for range 3000 {
		r.take(hit("a", lim, 1), hit("b", lim, 1))
	}
	reqs := []store.Request{hit("a", lim, 1), hit("b", lim, 1)}
	calls := r.rec.calls()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.s.Take(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
	})
	if r.rec.calls() != calls {
		t.Fatal("not answered locally")
	}
	if allocs != 1 {
		t.Fatalf("%v allocations per local answer, want 1", allocs)
	}
}

func BenchmarkLocal(b *testing.B) {
	clock := storetest.NewClock(storetest.Epoch())
	mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	s := lease.New(mem, lease.WithClock(clock.Now), lease.WithSweep(0), lease.WithFraction(1), lease.WithMaxBlock(1<<40))
	defer s.Close()
	lim := fixed(1<<40, time.Hour)
	reqs := []store.Request{hit("tenant-a", lim, 1), hit("route-b", lim, 1), hit("user-c", lim, 1)}
	ctx := context.Background()
	for range 5000 {
		_, _ = s.Take(ctx, reqs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Take(ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(st.LocalHits)/float64(3*(b.N+5000)), "local/hit")
}

// BenchmarkPassThrough is a batch without Lease ops: the decorator's cost
// over the backend's.
func BenchmarkPassThrough(b *testing.B) {
	clock := storetest.NewClock(storetest.Epoch())
	mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	s := lease.New(mem, lease.WithClock(clock.Now), lease.WithSweep(0))
	defer s.Close()
	lim := fixed(1<<40, time.Hour)
	reqs := []store.Request{{Key: "a", Limit: lim, Hits: 1}, {Key: "b", Limit: lim, Hits: 1}, {Key: "c", Limit: lim, Hits: 1}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Take(ctx, reqs); err != nil {
			b.Fatal(err)
		}
	}
}
