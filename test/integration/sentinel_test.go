package integration

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// Sentinel the envoyproxy way (REDIS_TYPE=SENTINEL, REDIS_URL=
// "master,sentinel"), through a real failover: the master dies, Sentinel
// promotes the replica, and ratelimitd follows it without a restart.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", portOf(master.Addr))
	sentinel := redistest.StartSentinel(t, "mymaster", master.Addr)
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	svc := startService(t, root, "REDIS_TYPE=SENTINEL", "REDIS_URL=mymaster,"+sentinel, "REDIS_TIMEOUT=500ms")

	if resp, err := svc.call(request("it", desc("global", "sentinel"))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("through Sentinel: %v %v", resp, err)
	}
	waitReplicated(t, replica.Addr)

	master.Stop()
	testkit.WaitFor(t, 30*time.Second, "ratelimitd to answer again after the failover", func() bool {
		resp, err := svc.call(request("it", desc("global", "sentinel")))
		return err == nil && resp.GetOverallCode() == ok
	})
	role, err := redis.NewClient(&redis.Options{Addr: replica.Addr}).Do(context.Background(), "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("the replica was not promoted: %v %v", role, err)
	}
	// The state written before the failover survived on the new master.
	resp, err := svc.call(request("it", withHits(desc("global", "sentinel"), 0)))
	// A lost state would read 99 after the one admitted call since.
	if err != nil || resp.GetStatuses()[0].GetLimitRemaining() >= 99 {
		t.Fatalf("after failover: %v %v, want the pre-failover hit still counted (remaining < 99)", resp, err)
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// waitReplicated waits until the replica holds a key (the asynchronous
// replication of the first decision).
func waitReplicated(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	testkit.WaitFor(t, 10*time.Second, "replication to the replica", func() bool {
		n, err := rdb.DBSize(context.Background()).Result()
		return err == nil && n > 0
	})
}
