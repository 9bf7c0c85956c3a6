package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// callCounter counts what reaches the backend: calls and ops, apart for
// the sweeps (refills and renewals) and the returns.
type callCounter struct {
	store.Lender
	sweeping                                                 bool
	reqCalls, reqOps, sweepCalls, sweepOps, retCalls, retOps int
}

func (c *callCounter) Take(ctx context.Context, r []store.Request) ([]store.Result, error) {
	c.count(len(r))
	return c.Lender.Take(ctx, r)
}

func (c *callCounter) TakeCharged(ctx context.Context, r []store.Request) ([]store.Result, []store.Charge, error) {
	c.count(len(r))
	return c.Lender.TakeCharged(ctx, r)
}

func (c *callCounter) Return(ctx context.Context, ch []store.Charge) error {
	c.retCalls++
	c.retOps += len(ch)
	return c.Lender.Return(ctx, ch)
}

func (c *callCounter) count(ops int) {
	if c.sweeping {
		c.sweepCalls++
		c.sweepOps += ops
		return
	}
	c.reqCalls++
	c.reqOps += ops
}

// BenchmarkLeaseZipf simulates the Zipf scenario of cmd/rlbench on a fake
// clock: three lease stores over one memstore, the bench's sample of 2^16
// Zipf(1.1) draws over 10^5 counters cycled at a given rate, each request
// to a random replica, a sweep every 100 ms. It reports what reaches the
// backend per decision after 60 s of warm-up, over 30 s: request-path
// calls (1 - local), their ops, the sweeps' ops, the returns' ops, and the
// hits the replicas hold at the end. It measures no CPU: it is how
// LEASE_IDLE and LEASE_TARGET were chosen (docs/performance.md). Run it
// with -benchtime 1x.
func BenchmarkLeaseZipf(b *testing.B) {
	z := rand.NewZipf(rand.New(rand.NewPCG(19, 3)), 1.1, 1, 100_000-1)
	sample := make([]string, 1<<16)
	for i := range sample {
		sample[i] = "z" + strconv.FormatUint(z.Uint64(), 10)
	}
	for _, c := range []struct {
		rate         int
		idle, target time.Duration
	}{
		{37000, 5 * time.Second, lease.DefaultTarget},
		{37000, 20 * time.Second, lease.DefaultTarget},
		{37000, lease.DefaultIdle, lease.DefaultTarget},
		{37000, lease.DefaultIdle, 10 * time.Second},
		{18000, 5 * time.Second, lease.DefaultTarget},
		{18000, 20 * time.Second, lease.DefaultTarget},
		{18000, lease.DefaultIdle, lease.DefaultTarget},
		{18000, lease.DefaultIdle, 10 * time.Second},
		{12000, lease.DefaultIdle, lease.DefaultTarget},
	} {
		b.Run(fmt.Sprintf("rate=%d/idle=%s/target=%s", c.rate, c.idle, c.target), func(b *testing.B) {
			for range b.N {
				simulateZipf(b, sample, c.rate, lease.WithIdle(c.idle), lease.WithTarget(c.target))
			}
		})
	}
}

func simulateZipf(b *testing.B, sample []string, rate int, opts ...lease.Option) {
	clock := storetest.NewClock(storetest.Epoch())
	mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer mem.Close()
	backend := &callCounter{Lender: mem}
	var replicas []*lease.Store
	for range 3 {
		s := lease.New(backend, append([]lease.Option{lease.WithClock(clock.Now), lease.WithSweep(0)}, opts...)...)
		defer s.Close()
		replicas = append(replicas, s)
	}
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1e9, Period: time.Hour}
	pick := rand.New(rand.NewPCG(1, 2))
	step := time.Second / time.Duration(rate)
	// 60 s of warm-up, three LEASE_IDLEs, as cmd/rlbench's: every replica
	// has seen nearly every counter of the sample twice, as in steady
	// traffic.
	warm, n := 60*rate, 90*rate
	var atWarm callCounter
	sinceSweep := time.Duration(0)
	ctx := context.Background()
	for i := range n {
		if i == warm {
			atWarm = *backend
		}
		clock.Advance(step)
		if sinceSweep += step; sinceSweep >= 100*time.Millisecond {
			sinceSweep = 0
			backend.sweeping = true
			for _, s := range replicas {
				if err := s.Tick(clock.Now()); err != nil {
					b.Fatal(err)
				}
			}
			backend.sweeping = false
		}
		req := []store.Request{{Key: sample[i%len(sample)], Limit: lim, Hits: 1, Lease: true}}
		if _, err := replicas[pick.IntN(len(replicas))].Take(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	per := func(now, then int) float64 { return float64(now-then) / float64(n-warm) }
	var held uint64
	for _, s := range replicas {
		held += s.Stats().Outstanding
	}
	b.ReportMetric(100*(1-per(backend.reqCalls, atWarm.reqCalls)), "local%")
	b.ReportMetric(per(backend.reqOps, atWarm.reqOps), "req-ops/dec")
	b.ReportMetric(per(backend.sweepOps, atWarm.sweepOps), "sweep-ops/dec")
	b.ReportMetric(per(backend.retOps, atWarm.retOps), "return-ops/dec")
	b.ReportMetric(float64(held), "held-hits")
}
