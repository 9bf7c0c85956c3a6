package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// BenchmarkClusterTake: one counter (one script) against three counters on
// three masters (three concurrent scripts), admitted, on a local Cluster.
func BenchmarkClusterTake(b *testing.B) {
	nodes := redistest.StartCluster(b, 3)
	var keys []string
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		for i := 0; ; i++ {
			k := fmt.Sprintf("{bench%d}", i)
			if err := c.Exists(context.Background(), k).Err(); err == nil || errors.Is(err, redis.Nil) {
				keys = append(keys, k)
				break
			}
		}
		_ = c.Close()
	}
	s, err := redisstore.New(redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	lim := window(1 << 40)
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("%d_masters", n), func(b *testing.B) {
			reqs := make([]store.Request, n)
			for i := range reqs {
				reqs[i] = store.Request{Key: keys[i], Limit: lim, Hits: 1}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Take(ctx, reqs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
