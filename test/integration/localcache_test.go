package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scriptCalls is how many EVALSHA/EVAL calls Redis has served.
func scriptCalls(t *testing.T, addr string) int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		total += n
	}
	return total
}

func TestLocalCacheSparesRedis(t *testing.T) {
	svc, rds := startWithRedis(t, itConfig, "LOCAL_CACHE_SIZE_IN_BYTES=1048576")
	req := request("it", desc("generic_key", "fixed"))
	for range 4 { // 3 admitted, the fourth denied by Redis
		if _, err := svc.call(req); err != nil {
			t.Fatal(err)
		}
	}
	before := scriptCalls(t, rds.Addr)
	for i := range 20 {
		resp, err := svc.call(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != over || resp.GetStatuses()[0].GetDurationUntilReset().AsDuration() <= 0 {
			t.Fatalf("cached call %d: %v", i, resp)
		}
	}
	if after := scriptCalls(t, rds.Addr); after != before {
		t.Fatalf("Redis served %d script calls for 20 requests over the limit, want 0 (local cache)", after-before)
	}
	// Another key still goes to Redis.
	if _, err := svc.call(request("it", desc("global", "other"))); err != nil {
		t.Fatal(err)
	}
	if after := scriptCalls(t, rds.Addr); after != before+1 {
		t.Fatalf("a key not over its limit: %d script calls, want 1", after-before)
	}
}
