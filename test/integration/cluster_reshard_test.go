package integration

import (
	"context"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// Moving the hot slot to another master under load: no error answered, no
// hit lost or charged twice.
func TestClusterReshardUnderLoad(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartCluster(t, 3)
	masters := redistest.Clients(t, nodes)
	// A hot value in one of the first 10 slots, which reshard moves first.
	hot := ""
	for i := 0; hot == ""; i++ {
		if v := "h" + strconv.Itoa(i); redisstore.Slot(scaleKey("user", v, "fixed_window")) < 10 {
			hot = v
		}
	}
	hotKey := scaleKey("user", hot, "fixed_window")
	src := masterIndex(t, masters, hotKey)
	dst := (src + 1) % 3
	id := func(c *redis.Client) string {
		s, err := c.Do(context.Background(), "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	root, _ := newConfigRoot(t, map[string]string{"scale.yaml": scaleConfig})
	svc := startService(t, root, "REDIS_TYPE=CLUSTER", "REDIS_URL="+redistest.Addrs(nodes), "REDIS_TIMEOUT=1s")

	var (
		admitted, failed atomic.Int64
		firstErr         atomic.Value
		stop             atomic.Bool
		wg               sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				resp, err := svc.client.ShouldRateLimit(ctx, request("scale", desc("user", hot)))
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case resp.GetOverallCode() == ok:
					admitted.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	out, err := exec.Command("redis-cli", "--cluster", "reshard", nodes[0].Addr, "--cluster-from", id(masters[src]),
		"--cluster-to", id(masters[dst]), "--cluster-slots", "10", "--cluster-yes").CombinedOutput()
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("reshard: %v\n%s", err, out)
	}
	if now := masterIndex(t, masters, hotKey); now != dst {
		t.Fatalf("the hot slot is on master %d after the reshard, want %d", now, dst)
	}
	charged := 1_000_000 - int64(remaining(t, svc, "user", hot))
	t.Logf("reshard of the hot slot under load: %d admitted, %d failed, %d charged", admitted.Load(), failed.Load(), charged)
	if failed.Load() > 0 {
		t.Errorf("%d calls failed during the reshard, first: %v", failed.Load(), firstErr.Load())
	}
	if charged != admitted.Load() {
		t.Errorf("%d hits charged for %d admitted calls", charged, admitted.Load())
	}
}
