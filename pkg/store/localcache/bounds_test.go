package localcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
)

// The cache's bounds and edges: its size, a zero size, a failing backend,
// Forget, several limits of one descriptor.

func TestSizeBound(t *testing.T) {
	const budget = 4096
	r := newRig(t, budget)
	maxEntries := 0
	for i := range 1000 {
		r.take(req(fmt.Sprintf("key-%04d", i), fw(0), 1))
		n, bytes := r.cache.Len()
		if bytes > budget {
			t.Fatalf("after %d keys: %d bytes in a %d-byte cache", i+1, bytes, budget)
		}
		maxEntries = max(maxEntries, n)
		// Keep key-0000 the most recently used: LRU must not evict it.
		if res, reached := r.one(req("key-0000", fw(0), 1)); reached || res.Allowed {
			t.Fatalf("after %d keys the most recently used entry was evicted", i+1)
		}
	}
	if maxEntries < budget/(8+200) {
		t.Fatalf("at most %d entries fit in %d bytes: the accounting is off", maxEntries, budget)
	}
	hits, misses, evictions := r.cache.Stats()
	if evictions != uint64(1000-maxEntries) || hits != 1000 || misses != 1000 {
		t.Fatalf("stats hits %d misses %d evictions %d, want 1000, 1000, %d", hits, misses, evictions, 1000-maxEntries)
	}
}

func TestZeroSizeCachesNothing(t *testing.T) {
	r := newRig(t, 0)
	r.take(req("k", fw(0), 1))
	if _, reached := r.one(req("k", fw(0), 1)); !reached {
		t.Fatal("a zero-byte cache answered")
	}
	if n, bytes := r.cache.Len(); n != 0 || bytes != 0 {
		t.Fatalf("%d entries, %d bytes", n, bytes)
	}
}

type failing struct{ store.Store }

func (failing) Take(context.Context, []store.Request) ([]store.Result, error) {
	return nil, fmt.Errorf("backend down")
}

func TestBackendErrorPassesThrough(t *testing.T) {
	c := localcache.New(failing{}, 1<<20)
	if _, err := c.Take(context.Background(), []store.Request{req("k", fw(1), 1)}); err == nil {
		t.Fatal("want the backend's error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Take(ctx, []store.Request{req("k", fw(1), 1)}); err == nil {
		t.Fatal("want the context's error")
	}
}

// A forgotten key goes back to the backend: after a counter reset, this
// replica must not keep answering the denial it cached.
func TestForget(t *testing.T) {
	r := newRig(t, 1<<20)
	r.take(req("k", fw(1), 1), req("other", fw(1), 1))
	r.one(req("k", fw(1), 1))
	r.one(req("other", fw(1), 1))
	if _, reached := r.one(req("k", fw(1), 1)); reached {
		t.Fatal("the denial was not cached")
	}
	r.cache.Forget("k", "missing")
	if _, reached := r.one(req("k", fw(1), 1)); !reached {
		t.Error("a forgotten key was answered from the cache")
	}
	if _, reached := r.one(req("other", fw(1), 1)); reached {
		t.Error("a key not forgotten left the cache")
	}
}

// Every limit of a descriptor spent: the cache answers, as for several
// descriptors.
func TestEveryLimitOfADescriptorCached(t *testing.T) {
	r := newRig(t, 1<<20)
	day := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: 24 * time.Hour}
	second := req("k:1", day, 1)
	second.Joined = true
	batch := []store.Request{req("k", fw(1), 1), second}
	r.take(batch...)
	r.take(batch...) // k denied; k:1 charged nothing, allowed
	r.take(req("k:1", day, 1))
	r.take(batch...) // both denied: cached
	before := r.backend.calls.Load()
	for i, res := range r.take(batch...) {
		if !res.FromCache || res.Allowed {
			t.Errorf("limit %d: %+v, want a cached denial", i, res)
		}
	}
	if r.backend.calls.Load() != before {
		t.Fatal("the backend was asked")
	}
}
