package localcache_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// Besides a refund, three changes give a counter room again after another
// replica may have cached it as spent: a Cluster undo, a lease's return and
// a counters reset. Each reaches replica B's cache the way a refund does
// (redisstore publishes the keys), and B admits the next hit from Redis at
// once, on the same clock instant: without the notice B answers its cached
// denial (up to LOCAL_CACHE_MAX_AGE, which these replicas do not set).

// TestResetReachesEveryReplica: replica A resets the counter B cached.
func TestResetReachesEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch().Add(time.Hour))
	a := newReplica(t, srv.Addr, clock, true)
	b := newReplica(t, srv.Addr, clock, true)
	lim := fw(5)
	spend(t, a, b, lim)
	if _, err := a.rs.Reset(t.Context(), []string{"k"}); err != nil {
		t.Fatal(err)
	}
	b.heard(1, "the reset")
	if res := b.take(req("k", lim, 5)); !res.Allowed || res.FromCache {
		t.Fatalf("replica B after the reset: %+v, want 5 hits admitted by Redis", res)
	}
}

// TestReturnReachesEveryReplica: replica A holds a lease of the counter
// while B is denied (the block took the room) and caches it; A's Stop
// gives the unused hits back.
func TestReturnReachesEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch().Add(time.Hour))
	rs, err := redisstore.New(redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	leases := lease.New(rs, lease.WithClock(clock.Now), lease.WithSweep(0),
		lease.WithTarget(time.Second), lease.WithIdle(time.Minute), lease.WithFraction(0.5))
	a := newReplicaOn(t, rs, leases, clock, true)
	b := newReplica(t, srv.Addr, clock, true)
	lim := fw(100)
	leased := store.Request{Key: "k", Limit: lim, Hits: 1, Lease: true}
	for i := 0; leases.Stats().Outstanding == 0; i++ {
		if i == 50 {
			t.Fatal("replica A never leased a block")
		}
		if res := a.take(leased); !res.Allowed {
			t.Fatalf("hit %d on replica A: %+v", i, res)
		}
		clock.Advance(10 * time.Millisecond)
	}
	var res store.Result
	for i := 0; ; i++ {
		if res = b.take(req("k", lim, 1)); !res.Allowed {
			break
		}
		if i == 100 {
			t.Fatal("replica B was never denied")
		}
	}
	if res.FromCache || res.Remaining != 0 {
		t.Fatalf("replica B's denial: %+v, want Redis's with nothing left", res)
	}
	if res := b.take(req("k", lim, 1)); res.Allowed || !res.FromCache {
		t.Fatalf("replica B's next hit: %+v, want its cached denial", res)
	}
	unused := leases.Stats().Outstanding
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := leases.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leases.Stats().Returned; got != unused {
		t.Fatalf("replica A returned %d hits, want its %d unused", got, unused)
	}
	b.heard(1, "the return")
	if res := b.take(req("k", lim, unused)); !res.Allowed || res.FromCache {
		t.Fatalf("replica B after the return: %+v, want the %d returned hits admitted by Redis", res, unused)
	}
}

// TestUndoReachesEveryReplica: on a 3-master Cluster, replica A's request
// on k and d (two slots) charges k's group while d's is held; B, asking
// then, finds k spent and caches it; d's group denies, A's undo gives k
// back.
func TestUndoReachesEveryReplica(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	clock := storetest.NewClock(storetest.Epoch().Add(time.Hour))
	k, d := "{ua}k", "{ub}d"
	g := &holdGroup{first: k, held: d, charged: make(chan struct{}), release: make(chan struct{})}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	cc.AddHook(g)
	t.Cleanup(func() { _ = cc.Close() })
	rs, err := redisstore.New(redisstore.WithClient(cc), redisstore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	a := newReplicaOn(t, rs, rs, clock, true)
	rsB, err := redisstore.New(redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), redisstore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	b := newReplicaOn(t, rsB, rsB, clock, true)
	lim := fw(5)
	if res := a.take(req(k, lim, 4)); !res.Allowed {
		t.Fatalf("4 hits of 5 on k: %+v", res)
	}
	if res := a.take(req(d, lim, 5)); !res.Allowed {
		t.Fatalf("5 hits of 5 on d: %+v", res)
	}
	g.armed.Store(true)
	denied := make(chan []store.Result, 1)
	go func() {
		res, err := a.cache.Take(context.Background(), []store.Request{req(k, lim, 1), req(d, lim, 1)})
		if err != nil {
			t.Error(err)
		}
		denied <- res
	}()
	select {
	case <-g.charged:
	case <-time.After(10 * time.Second):
		t.Fatal("k's group never ran")
	}
	if res := b.take(req(k, lim, 1)); res.Allowed || res.FromCache || res.Remaining != 0 {
		t.Fatalf("replica B on k while A's charge stands: %+v, want Redis's denial, nothing left", res)
	}
	if res := b.take(req(k, lim, 1)); res.Allowed || !res.FromCache {
		t.Fatalf("replica B's next hit on k: %+v, want its cached denial", res)
	}
	close(g.release)
	if res := <-denied; res == nil || !store.VerdictOf([]store.Request{req(k, lim, 1), req(d, lim, 1)}, res).Denied() {
		t.Fatalf("replica A's request on k and d: %+v, want it denied", res)
	}
	b.heard(1, "the undo")
	if res := b.take(req(k, lim, 1)); !res.Allowed || res.FromCache {
		t.Fatalf("replica B on k after the undo: %+v, want its last hit admitted by Redis", res)
	}
}

// holdGroup is a go-redis hook that, once armed, holds the take of held
// until release, and says when the take of first has run.
type holdGroup struct {
	first, held string
	armed       atomic.Bool
	once        sync.Once
	charged     chan struct{}
	release     chan struct{}
}

func (g *holdGroup) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *holdGroup) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *holdGroup) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.armed.Load() && takeOn(cmd, g.held) {
			<-g.release
		}
		err := next(ctx, cmd)
		if err == nil && g.armed.Load() && takeOn(cmd, g.first) {
			g.once.Do(func() { close(g.charged) })
		}
		return err
	}
}

// takeOn reports whether cmd is an FCALL whose first key is key.
func takeOn(cmd redis.Cmder, key string) bool {
	args := cmd.Args()
	return cmd.Name() == "fcall" && len(args) > 3 && args[3] == key
}
