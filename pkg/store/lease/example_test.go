package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// A program that embeds the store leases with this package alone: it wraps
// a store that lends blocks (redisstore in production, memstore here so
// that the output is exact), marks the requests of rules that lease, and
// tells the lease store when its rules change, when it resets counters,
// and when it shuts down. The clock is fixed and stepped by hand; a real
// program keeps the default clock and sweeper.
func Example() {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	backend := memstore.New(memstore.WithClock(clock), memstore.WithSweep(0, 0))
	leases := lease.New(backend, lease.WithClock(clock), lease.WithSweep(0))
	ctx := context.Background()
	_ = leases.SetRules(ctx, "rules v1")

	limit := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Hour}
	hit := []store.Request{{Key: "tenant-a", Limit: limit, Hits: 1, Lease: true}}
	count := func() uint64 {
		res, _ := backend.Take(ctx, []store.Request{{Key: "tenant-a", Limit: limit}})
		return limit.Requests - res[0].Remaining
	}
	for range 200 {
		if res, err := leases.Take(ctx, hit); err != nil || !res[0].Allowed {
			fmt.Println("denied:", err)
		}
		now = now.Add(10 * time.Millisecond)
	}
	st := leases.Stats()
	fmt.Printf("200 hits: %d answered from blocks; the backend counts %d, %d of them held unused\n", st.LocalHits, count(), st.Outstanding)

	// New rules: every lease ends and its unused hits go back.
	_ = leases.SetRules(ctx, "rules v2")
	fmt.Printf("after a rule change: the backend counts %d, %d held\n", count(), leases.Stats().Outstanding)

	// A counters reset: forget the key around the backend's delete.
	for range 100 {
		_, _ = leases.Take(ctx, hit)
		now = now.Add(10 * time.Millisecond)
	}
	leases.Forget("tenant-a")
	_, _ = backend.Reset(ctx, []string{"tenant-a"})
	leases.Forget("tenant-a")
	fmt.Printf("after a reset: the backend counts %d, %d held\n", count(), leases.Stats().Outstanding)

	// Shutdown: give every lease back within a deadline.
	for range 100 {
		_, _ = leases.Take(ctx, hit)
		now = now.Add(10 * time.Millisecond)
	}
	stop, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = leases.Stop(stop)
	fmt.Printf("after Stop: the backend counts %d, %d held\n", count(), leases.Stats().Outstanding)
	_ = leases.Close() // closes the backend too

	// Output:
	// 200 hits: 192 answered from blocks; the backend counts 267, 67 of them held unused
	// after a rule change: the backend counts 200, 0 held
	// after a reset: the backend counts 0, 0 held
	// after Stop: the backend counts 100, 0 held
}
