package redisstore_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease/leasetest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestLeaseProperty is issue 19's "Done when" on real Redis: three lease
// replicas, each with its own client of one redis-server (and of one
// 3-master Cluster, where a batch's two counters sit in different slots),
// never admit more than the limit, a replica killed mid-lease included,
// and admit at least 95% of it at twice the load. The script reads the
// test's clock (WithClock), so the replay is exact.
func TestLeaseProperty(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		srv := redistest.Start(t)
		clock := storetest.NewClock(storetest.Epoch())
		leasetest.Property(t, clock, func() store.Lender {
			return newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now))
		})
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := redistest.StartCluster(t, 3)
		clock := storetest.NewClock(storetest.Epoch())
		leasetest.Property(t, clock, func() store.Lender {
			return newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), redisstore.WithClock(clock.Now))
		})
	})
}
