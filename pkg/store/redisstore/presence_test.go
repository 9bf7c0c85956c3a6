package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// The presence counts the replicas that beat within its TTL (a beat older
// than it is trimmed, a replica that leaves is gone at once), keeps one
// epoch while Redis keeps its data and another once Redis lost it, and
// gives both of its keys a TTL; on a Cluster both keys share a slot.
func TestPresence(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*redisstore.Store, redis.UniversalClient)
	}{
		{"single", func(t *testing.T) (*redisstore.Store, redis.UniversalClient) {
			srv := redistest.Start(t)
			return newStore(t, redisstore.WithAddr(srv.Addr)), redis.NewClient(&redis.Options{Addr: srv.Addr})
		}},
		{"cluster", func(t *testing.T) (*redisstore.Store, redis.UniversalClient) {
			nodes := redistest.StartCluster(t, 3)
			addrs := redistest.Addrs(nodes)
			return newStore(t, redisstore.WithAddr(addrs), redisstore.WithType(redisstore.Cluster)),
				redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb := tc.open(t)
			defer rdb.Close()
			ctx := context.Background()
			const key = "rl{ratelimitd}:replicas"
			p := s.Presence(key, 3*time.Second)
			var epoch string
			for i := range 3 {
				live, e, err := p.Beat(ctx, "r"+strconv.Itoa(i))
				if err != nil || live != i+1 || (i > 0 && e != epoch) || e == "" {
					t.Fatalf("beat %d: %d live, epoch %q (first %q), %v; want %d and one epoch", i, live, e, epoch, err, i+1)
				}
				epoch = e
			}
			// A replica whose last beat is older than the TTL, by Redis's clock.
			now, _ := rdb.Time(ctx).Result()
			rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(-4 * time.Second).UnixMilli()), Member: "old"})
			if err := p.Leave(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
			if live, _, err := p.Beat(ctx, "r0"); err != nil || live != 2 {
				t.Errorf("after one left and one aged out: %d live, %v; want 2", live, err)
			}
			for _, k := range []string{key, key + ":epoch"} {
				if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
					t.Errorf("%s: TTL %s %v, want one", k, ttl, err)
				}
			}
			rdb.Del(ctx, key, key+":epoch") // Redis lost its data
			if live, e, err := p.Beat(ctx, "r0"); err != nil || live != 1 || e == epoch || e == "" {
				t.Errorf("after Redis lost its data: %d live, epoch %q (was %q), %v; want 1 and another epoch", live, e, epoch, err)
			}
		})
	}
}

// NotRun tells a Take Redis certainly did not run (connection refused)
// from one it may have run (timed out after it was sent).
func TestNotRun(t *testing.T) {
	srv := redistest.StartProcess(t)
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithTimeout(time.Second), redisstore.WithPipeline(0, 0))
	mustTake(t, s, batch(1, window(5), 1))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "3000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := s.Take(ctx, batch(1, window(5), 1))
	cancel()
	if err == nil || redisstore.NotRun(err) {
		t.Errorf("a take on a paused Redis: %v, NotRun %t; want an error that may have run", err, redisstore.NotRun(err))
	}
	srv.Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = s.Take(ctx, batch(1, window(5), 1))
	cancel()
	if err == nil || !redisstore.NotRun(err) {
		t.Errorf("a take on a stopped Redis: %v, NotRun %t; want an error that certainly did not run", err, redisstore.NotRun(err))
	}
}
