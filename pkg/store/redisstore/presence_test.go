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
			var first time.Time
			for i := range 3 {
				b, err := p.Beat(ctx, "r"+strconv.Itoa(i), i > 0)
				if err != nil || b.Live != i+1 || b.Local != i || (i > 0 && b.Epoch != epoch) || b.Epoch == "" {
					t.Fatalf("beat %d: %+v, %v; want %d live, %d local and one epoch (first %q)", i, b, err, i+1, i, epoch)
				}
				if i == 0 {
					first = b.Now
				}
				if !b.Oldest.Equal(first) || b.Now.Before(first) {
					t.Errorf("beat %d: oldest beat %s, now %s; want the first one's time, %s, and a later one", i, b.Oldest, b.Now, first)
				}
				epoch = b.Epoch
			}
			if b, err := p.Beat(ctx, "r1", false); err != nil || b.Local != 1 {
				t.Errorf("after r1 is no longer local: %+v, %v; want 1 local", b, err)
			}
			// A replica whose last beat is older than the TTL, by Redis's clock.
			now, _ := rdb.Time(ctx).Result()
			rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(-4 * time.Second).UnixMilli()), Member: "old"})
			if err := p.Leave(ctx, "r2"); err != nil {
				t.Fatal(err)
			}
			if b, err := p.Beat(ctx, "r0", false); err != nil || b.Live != 2 || b.Local != 0 {
				t.Errorf("after one left (local) and one aged out: %+v, %v; want 2 live and 0 local", b, err)
			}
			p.Beat(ctx, "r1", true)
			for _, k := range []string{key, key + ":local", key + ":epoch"} {
				if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
					t.Errorf("%s: TTL %s %v, want one", k, ttl, err)
				}
			}
			rdb.Del(ctx, key, key+":local", key+":epoch") // Redis lost its data
			if b, err := p.Beat(ctx, "r0", false); err != nil || b.Live != 1 || b.Epoch == epoch || b.Epoch == "" {
				t.Errorf("after Redis lost its data: %+v, %v; want 1 live and another epoch than %q", b, err, epoch)
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
