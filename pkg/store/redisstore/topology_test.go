package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// TestSentinelSmoke finds the master through one real Sentinel process.
func TestSentinelSmoke(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, "mymaster", master.Addr)

	s := newStore(t, redisstore.WithType(redisstore.Sentinel), redisstore.WithAddr("mymaster,"+sentinel))
	res := mustTake(t, s, batch(3, window(5), 2))
	for i, r := range res {
		if !r.Allowed || r.Remaining != 3 {
			t.Errorf("op %d through Sentinel: %+v, want allowed with remaining 3", i, r.Decision)
		}
	}
	// The state landed on the master Sentinel named.
	direct := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	if n, err := direct.DBSize(t.Context()).Result(); err != nil || n == 0 {
		t.Errorf("master holds %d keys (%v), want the store's state", n, err)
	}
}

// TestClusterSmoke runs against a one-node Redis Cluster holding every slot.
// Redis refuses a script whose keys span slots, even on a single node, so a
// batch across slots runs one script per slot group.
func TestClusterSmoke(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Do(t.Context(), "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	testkit.WaitForNil(t, 10*time.Second, "the cluster to be ok", func() error {
		info, err := admin.ClusterInfo(t.Context()).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = fmt.Errorf("cluster not ok yet")
		}
		return err
	})

	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(srv.Addr))
	lim := window(5)
	tagged := []store.Request{{Key: "{t}a", Limit: lim, Hits: 1}, {Key: "{t}b", Limit: lim, Hits: 2}}
	res := mustTake(t, s, tagged)
	if !res[0].Allowed || res[0].Remaining != 4 || !res[1].Allowed || res[1].Remaining != 3 {
		t.Errorf("same-slot batch on a cluster: %+v, %+v", res[0].Decision, res[1].Decision)
	}
	spread := []store.Request{{Key: "a", Limit: lim, Hits: 1}, {Key: "b", Limit: algorithms.Limit(lim), Hits: 1}}
	res = mustTake(t, s, spread)
	if !res[0].Allowed || res[0].Remaining != 4 || !res[1].Allowed || res[1].Remaining != 4 {
		t.Errorf("cross-slot batch on a cluster: %+v, %+v", res[0].Decision, res[1].Decision)
	}
}
