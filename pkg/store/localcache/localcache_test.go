package localcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// The cache must never change an answer: the whole conformance suite runs
// through it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) store.Store {
		return localcache.New(memstore.New(memstore.WithClock(clock.Now)), 1<<20, localcache.WithClock(clock.Now))
	})
}

// counting counts the batches that reach the backend.
type counting struct {
	store.Store
	calls atomic.Int64
}

func (c *counting) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	c.calls.Add(1)
	return c.Store.Take(ctx, reqs)
}

func fw(n uint64) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: time.Minute}
}

func TestCachedDenials(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch().Add(20 * time.Second))
	backend := &counting{Store: memstore.New(memstore.WithClock(clock.Now))}
	c := localcache.New(backend, 1<<20, localcache.WithClock(clock.Now))
	ctx := context.Background()
	take := func(reqs ...store.Request) []store.Result {
		t.Helper()
		res, err := c.Take(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	req := func(key string, lim algorithms.Limit, hits uint64) store.Request {
		return store.Request{Key: key, Limit: lim, Hits: hits}
	}

	take(req("k", fw(2), 2))
	if res := take(req("k", fw(2), 1)); res[0].Allowed || res[0].FromCache {
		t.Fatalf("first denial must come from the backend: %+v", res[0])
	}
	calls := backend.calls.Load()

	clock.Advance(10 * time.Second)
	res := take(req("k", fw(2), 1))
	if res[0].Allowed || !res[0].FromCache || res[0].RetryAfter != 30*time.Second || res[0].ResetAfter != 30*time.Second {
		t.Fatalf("cached denial: %+v, want denied from cache, 30s to the window's end", res[0])
	}
	if backend.calls.Load() != calls {
		t.Fatal("a cached denial reached the backend")
	}

	// A rule changed by hot reload is a different entry.
	if res := take(req("k", fw(10), 1)); !res[0].Allowed || res[0].FromCache {
		t.Fatalf("after a limit change: %+v, want the backend's answer", res[0])
	}
	// Another op in the batch sends the whole batch to the backend.
	if res := take(req("k", fw(2), 1), req("other", fw(2), 1)); res[0].FromCache || res[0].Allowed {
		t.Fatalf("mixed batch: %+v", res)
	}

	// At the window's end the entry is gone.
	clock.Advance(30 * time.Second)
	if res := take(req("k", fw(2), 1)); !res[0].Allowed || res[0].FromCache {
		t.Fatalf("next window: %+v, want admitted by the backend", res[0])
	}
	hits, misses, _ := c.Stats()
	if hits != 1 || misses == 0 {
		t.Fatalf("stats hits %d misses %d", hits, misses)
	}
}

func TestFewerHitsStillAsked(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	c := localcache.New(memstore.New(memstore.WithClock(clock.Now)), 1<<20, localcache.WithClock(clock.Now))
	ctx := context.Background()
	if _, err := c.Take(ctx, []store.Request{{Key: "k", Limit: fw(5), Hits: 3}}); err != nil {
		t.Fatal(err)
	}
	// 3 of 5 used: 4 hits are denied, but 2 still fit and must be admitted.
	res, _ := c.Take(ctx, []store.Request{{Key: "k", Limit: fw(5), Hits: 4}})
	if res[0].Allowed {
		t.Fatal("4 hits with 2 left admitted")
	}
	res, _ = c.Take(ctx, []store.Request{{Key: "k", Limit: fw(5), Hits: 2}})
	if !res[0].Allowed || res[0].FromCache {
		t.Fatalf("2 hits with 2 left: %+v, want admitted by the backend", res[0])
	}
}

func TestSizeBound(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	const budget = 4096
	c := localcache.New(memstore.New(memstore.WithClock(clock.Now)), budget, localcache.WithClock(clock.Now))
	ctx := context.Background()
	for i := range 1000 {
		key := "key-" + string(rune('a'+i%26)) + time.Duration(i).String()
		if _, err := c.Take(ctx, []store.Request{{Key: key, Limit: fw(0), Hits: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, evictions := c.Stats()
	if evictions < 900 {
		t.Fatalf("%d evictions after 1000 denied keys in %d bytes, want the cache bounded", evictions, budget)
	}
}
