package localcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// replica is one ratelimitd's store stack on a shared Redis: its own
// redisstore (rs) under its own local cache, on the test's clock.
type replica struct {
	t     *testing.T
	rs    *redisstore.Store
	cache *localcache.Store
	// subscribed is signalled each time the refund subscription is made.
	subscribed chan struct{}
}

func newReplica(t *testing.T, addr string, clock *storetest.Clock, watch bool, opts ...localcache.Option) *replica {
	t.Helper()
	rs, err := redisstore.New(redisstore.WithAddr(addr), redisstore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	return newReplicaOn(t, rs, rs, clock, watch, opts...)
}

// newReplicaOn is a replica whose cache decorates next, rs or a decorator
// of it (a lease store).
func newReplicaOn(t *testing.T, rs *redisstore.Store, next store.Store, clock *storetest.Clock, watch bool, opts ...localcache.Option) *replica {
	t.Helper()
	r := &replica{t: t, rs: rs, subscribed: make(chan struct{}, 8)}
	opts = append(opts, localcache.WithClock(clock.Now))
	if watch {
		opts = append(opts, localcache.WithInvalidations(func(ctx context.Context, drop func(...string), flush func()) error {
			return rs.WatchRefunds(ctx, drop, func() { flush(); r.subscribed <- struct{}{} })
		}))
	}
	r.cache = localcache.New(next, 1<<20, opts...)
	t.Cleanup(func() { _ = r.cache.Close() })
	if watch {
		select {
		case <-r.subscribed:
		case <-time.After(10 * time.Second):
			t.Fatal("the refund subscription was never made")
		}
	}
	return r
}

func (r *replica) take(req store.Request) store.Result {
	r.t.Helper()
	res, err := r.cache.Take(context.Background(), []store.Request{req})
	if err != nil {
		r.t.Fatal(err)
	}
	return res[0]
}

// spend fills key (limit 5 a minute) on a and has b learn the denial:
// b's next hit is answered from its cache.
func spend(t *testing.T, a, b *replica, lim algorithms.Limit) {
	t.Helper()
	if res := a.take(req("k", lim, 5)); !res.Allowed {
		t.Fatalf("5 hits of 5 on replica A: %+v", res)
	}
	if res := b.take(req("k", lim, 1)); res.Allowed || res.FromCache {
		t.Fatalf("a 6th hit on replica B: %+v, want Redis's denial", res)
	}
	if res := b.take(req("k", lim, 1)); res.Allowed || !res.FromCache {
		t.Fatalf("replica B's next hit: %+v, want its cached denial", res)
	}
}

// heard waits until r's cache was told of n keys in all.
func (r *replica) heard(n uint64, what string) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.cache.Invalidated() < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("the replica never heard of %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func refundOf(key string, lim algorithms.Limit, hits uint64) store.Request {
	r := req(key, lim, hits)
	r.Mode = algorithms.NegativeHits
	return r
}

// Two replicas with the local cache on one Redis: a refund on replica A of
// a counter replica B has cached as spent reaches B (the take script
// publishes it, B's subscription drops the entry), and B admits the next
// hit at once, on the same clock instant. Without the subscription B keeps
// answering its cached denial until LOCAL_CACHE_MAX_AGE (WithMaxAge), the
// documented bound, and not a µs longer.
func TestRefundReachesEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	lim := fw(5)
	t.Run("invalidated", func(t *testing.T) {
		clock := storetest.NewClock(storetest.Epoch().Add(time.Hour))
		a := newReplica(t, srv.Addr, clock, true)
		b := newReplica(t, srv.Addr, clock, true)
		spend(t, a, b, lim)
		if res := a.take(refundOf("k", lim, 2)); !res.Allowed || res.Remaining != 2 {
			t.Fatalf("refund of 2 on replica A: %+v, want allowed with 2 left", res)
		}
		b.heard(1, "the refund")
		for i, want := range []bool{true, true, false} {
			if res := b.take(req("k", lim, 1)); res.Allowed != want || res.FromCache {
				t.Fatalf("replica B's hit %d after the refund: %+v, want allowed=%v from Redis", i, res, want)
			}
		}
	})
	t.Run("missed, bounded by the max age", func(t *testing.T) {
		clock := storetest.NewClock(storetest.Epoch().Add(2 * time.Hour))
		a := newReplica(t, srv.Addr, clock, false)
		b := newReplica(t, srv.Addr, clock, false, localcache.WithMaxAge(time.Second))
		spend(t, a, b, lim)
		a.take(refundOf("k", lim, 2))
		clock.Advance(time.Second - time.Microsecond)
		if res := b.take(req("k", lim, 1)); res.Allowed || !res.FromCache {
			t.Fatalf("replica B within the max age: %+v, want its cached denial", res)
		}
		clock.Advance(time.Microsecond)
		if res := b.take(req("k", lim, 1)); !res.Allowed || res.FromCache {
			t.Fatalf("replica B at the max age: %+v, want Redis's admission", res)
		}
	})
}
