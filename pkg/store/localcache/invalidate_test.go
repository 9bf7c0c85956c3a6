package localcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// cachedDenial fills k (limit 1) and has the cache learn its denial.
func (r *rig) cachedDenial(k string) {
	r.t.Helper()
	r.take(req(k, fw(1), 1))
	r.one(req(k, fw(1), 1))
	if _, reached := r.one(req(k, fw(1), 1)); reached {
		r.t.Fatalf("the denial of %q was not cached", k)
	}
}

// An invalidated key (a refund on another replica) goes back to the
// backend; the others stay cached; Flush drops them all.
func TestInvalidate(t *testing.T) {
	r := newRig(t, 1<<20)
	for _, k := range []string{"a", "b", "c"} {
		r.cachedDenial(k)
	}
	r.cache.Invalidate("a", "missing")
	if _, reached := r.one(req("a", fw(1), 1)); !reached {
		t.Error("an invalidated key was answered from the cache")
	}
	if _, reached := r.one(req("b", fw(1), 1)); reached {
		t.Error("a key not invalidated left the cache")
	}
	r.cache.Flush()
	for _, k := range []string{"b", "c"} {
		if _, reached := r.one(req(k, fw(1), 1)); !reached {
			t.Errorf("%q answered from the cache after Flush", k)
		}
	}
}

// racing calls during on its backend call, as an invalidation that
// arrives while a backend answer is on its way.
type racing struct {
	store.Store
	during func()
}

func (r *racing) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	res, err := r.Store.Take(ctx, reqs)
	if r.during != nil {
		r.during()
	}
	return res, err
}

// A denial the backend gave before an invalidation, but which reaches the
// cache after it, is not cached: it may predate the refund. One given
// after it is.
func TestInvalidationBeatsAnAnswerOnItsWay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		invalidate func(c *localcache.Store)
		key        string
		cached     bool
	}{
		{"the key invalidated", func(c *localcache.Store) { c.Invalidate("k") }, "k", false},
		{"another key invalidated", func(c *localcache.Store) { c.Invalidate("other") }, "k", true},
		{"everything flushed", func(c *localcache.Store) { c.Flush() }, "k", false},
		{"many keys invalidated since", func(c *localcache.Store) {
			for i := range 20000 {
				c.Invalidate(fmt.Sprint("other", i))
			}
		}, "k", false},
		{"the key among a reset of many keys", func(c *localcache.Store) {
			keys := []string{"k"}
			for i := range 9000 {
				keys = append(keys, fmt.Sprint("other", i))
			}
			c.Invalidate(keys...)
		}, "k", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Epoch())
			backend := &racing{Store: memstore.New(memstore.WithClock(clock.Now))}
			cache := localcache.New(backend, 1<<20, localcache.WithClock(clock.Now))
			ctx := context.Background()
			if _, err := cache.Take(ctx, []store.Request{req(tc.key, fw(1), 1)}); err != nil {
				t.Fatal(err)
			}
			backend.during = func() { tc.invalidate(cache) }
			if res, err := cache.Take(ctx, []store.Request{req(tc.key, fw(1), 1)}); err != nil || res[0].Allowed {
				t.Fatalf("second hit: %+v, %v; want denied", res, err)
			}
			backend.during = nil
			if n, _ := cache.Len(); (n == 1) != tc.cached {
				t.Errorf("%d entries after the answer, want cached=%v", n, tc.cached)
			}
		})
	}
}

// WithMaxAge bounds how long a replica answers a denial from its cache
// without asking the backend again: the bound on a missed invalidation.
func TestMaxAge(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	backend := &counting{Store: memstore.New(memstore.WithClock(clock.Now))}
	r := &rig{t: t, clock: clock, backend: backend, cache: localcache.New(backend, 1<<20, localcache.WithClock(clock.Now), localcache.WithMaxAge(time.Second))}
	r.cachedDenial("k") // a window with 60 s left
	clock.Advance(time.Second - time.Microsecond)
	if _, reached := r.one(req("k", fw(1), 1)); reached {
		t.Fatal("answered by the backend before the entry's max age")
	}
	clock.Advance(time.Microsecond)
	if res, reached := r.one(req("k", fw(1), 1)); !reached || res.Allowed {
		t.Fatalf("at the max age: %+v (backend %v), want the backend's denial", res, reached)
	}
	// The backend's new denial renews the entry for another max age.
	clock.Advance(time.Second - time.Microsecond)
	if _, reached := r.one(req("k", fw(1), 1)); reached {
		t.Fatal("the renewed entry was not answered from")
	}
}
