package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// Three masters, several domains: each counter has its own hash tag, so a
// request's counters may span masters (one script per slot group, all or
// nothing), and every domain's counters spread over the shards.
func TestRedisClusterOfThreeMasters(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartCluster(t, 3)
	var cfg strings.Builder
	files := map[string]string{}
	for _, d := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"} {
		cfg.Reset()
		fmt.Fprintf(&cfg, "domain: %s\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 3}\n  - key: ip\n    rate_limit: {unit: day, requests_per_unit: 100, algorithm: token_bucket}\n", d)
		files[d+".yaml"] = cfg.String()
	}
	root, _ := newConfigRoot(t, files)
	svc := startService(t, root, "REDIS_TYPE=CLUSTER", "REDIS_URL="+redistest.Addrs(nodes))
	for domain := range files {
		domain = strings.TrimSuffix(domain, ".yaml")
		var got []rlsv3.RateLimitResponse_Code
		for range 4 {
			resp, err := svc.call(request(domain, desc("user", "u1"), desc("ip", "10.0.0.1")))
			if err != nil {
				t.Fatalf("%s: %v", domain, err)
			}
			got = append(got, resp.GetOverallCode())
		}
		if !equal(got, []rlsv3.RateLimitResponse_Code{ok, ok, ok, over}) {
			t.Fatalf("%s: %v, want three OK then OVER_LIMIT", domain, got)
		}
	}
	// The domains' keys did spread over more than one master.
	used := 0
	for _, n := range nodes {
		if keys := clusterKeyCount(t, n.Addr); keys > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("the counters landed on %d master(s); per-counter hash tags should spread them", used)
	}
}

func clusterKeyCount(t *testing.T, addr string) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	n, err := rdb.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
