package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// startReplicas runs three ratelimitd replicas with on_store_error: local
// (ON_STORE_ERROR) on one Redis deployment and waits until each has seen
// the others.
func startReplicas(t *testing.T, limit int, env ...string) []*service {
	t.Helper()
	root, _ := newConfigRoot(t, map[string]string{"outage.yaml": fmt.Sprintf(outageConfig, limit)})
	var svcs []*service
	for range 3 {
		svcs = append(svcs, startService(t, root, append(append(env, outageEnv...), "REDIS_TIMEOUT="+outageRedisTimeout.String())...))
	}
	waitShares(t, svcs)
	return svcs
}

// A Cluster master killed under even load on three replicas with
// on_store_error: local: no call fails while its replica is promoted, and
// the window admits at most 1.1 x the limit.
func TestOutageClusterMasterKill(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartClusterWithReplicas(t, 3, 1, time.Second)
	clients := redistest.Clients(t, nodes)
	var masters []*redis.Client
	var masterNodes []*redistest.Server
	for i, c := range clients {
		if role, _ := c.Do(context.Background(), "ROLE").Slice(); len(role) > 0 && role[0] == "master" {
			masters, masterNodes = append(masters, c), append(masterNodes, nodes[i])
		}
	}
	const limit = 800
	hot := valueOn(t, masters, 0, "hot", func(v string) string { return counterKey("outage", "k", v, "fixed_window", time.Hour) })
	var replica *redis.Client
	for _, c := range clients {
		if role, _ := c.Do(context.Background(), "ROLE").Slice(); len(role) > 2 && role[0] == "slave" && fmt.Sprint(role[2]) == portOf(masterNodes[0].Addr) {
			replica = c
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", masterNodes[0].Addr)
	}
	svcs := startReplicas(t, limit, "REDIS_TYPE=CLUSTER", "REDIS_URL="+redistest.Addrs(nodes))
	roomInWindow(t, time.Hour, time.Minute)
	load := startLoad(svcs, request("outage", desc("k", hot)))
	load.waitAdmitted(t, limit/8)
	waitReplicaCaughtUp(t, masters[0], replica)
	masterNodes[0].Stop()
	testkit.WaitFor(t, 20*time.Second, "the killed master's replica to be promoted", func() bool {
		role, err := replica.Do(context.Background(), "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	waitReconciled(t, svcs, 20*time.Second)
	load.waitBackOnStore(t, svcs)
	judgeOutage(t, svcs, load, load.finish(), limit, hot, "Cluster master kill")
}

// A Sentinel failover under even load on three replicas with
// on_store_error: local: no call fails, the window admits at most 1.1 x
// the limit.
func TestOutageSentinelFailover(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", portOf(master.Addr))
	sentinel := redistest.StartSentinel(t, "mymaster", master.Addr)
	const limit = 800
	svcs := startReplicas(t, limit, "REDIS_TYPE=SENTINEL", "REDIS_URL=mymaster,"+sentinel)
	waitReplicated(t, replica.Addr) // the replicas' presence
	roomInWindow(t, time.Hour, time.Minute)
	rdb := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rdb.Close()
	load := startLoad(svcs, request("outage", desc("k", "hot")))
	load.waitAdmitted(t, limit/8)
	waitReplicaCaughtUp(t, redistest.Clients(t, []*redistest.Server{master})[0], rdb)
	master.Stop()
	testkit.WaitFor(t, 30*time.Second, "Sentinel to promote the replica", func() bool {
		role, err := rdb.Do(context.Background(), "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	waitReconciled(t, svcs, 20*time.Second)
	load.waitBackOnStore(t, svcs)
	judgeOutage(t, svcs, load, load.finish(), limit, "hot", "Sentinel failover")
}

// Redis stopped for 30 s and restarted empty under even load on three
// replicas with on_store_error: local: no call fails, and the window admits
// at most 1.1 x the limit, Redis getting back, besides the hits admitted
// locally, each replica's share of what it had counted before.
func TestOutageRedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	rds := redistest.StartProcess(t)
	const limit = 3000
	svcs := startReplicas(t, limit, redisEnv(rds.Addr)...)
	roomInWindow(t, time.Hour, 2*time.Minute)
	load := startLoad(svcs, request("outage", desc("k", "hot")))
	time.Sleep(500 * time.Millisecond)
	rds.Stop()
	time.Sleep(30 * time.Second)
	rds.Restart(t)
	waitReconciled(t, svcs, 20*time.Second)
	load.waitBackOnStore(t, svcs)
	judgeOutage(t, svcs, load, load.finish(), limit, "hot", "Redis stopped 30 s, restarted empty")
}
