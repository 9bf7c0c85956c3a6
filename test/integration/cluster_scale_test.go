package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

const scaleConfig = `domain: scale
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1000000}
  - key: small
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: fw
    rate_limit: {unit: day, requests_per_unit: 40}
  - key: tb
    rate_limit: {unit: day, requests_per_unit: 40, algorithm: token_bucket}
`

// scaleKey is the store key of a one-entry descriptor of domain scale.
func scaleKey(key, value, alg string) string {
	return counterKey("scale", key, value, alg, 24*time.Hour)
}

// scaleKeyOf is scaleKey for valueOn.
func scaleKeyOf(key, alg string) func(value string) string {
	return func(value string) string { return scaleKey(key, value, alg) }
}

func clusterScriptCalls(t *testing.T, masters []*redis.Client) int {
	t.Helper()
	n := 0
	for _, m := range masters {
		n += int(redisinfo.ScriptCalls(redistest.CommandStats(t, m)))
	}
	return n
}

func remaining(t *testing.T, svc *service, key, value string) uint64 {
	t.Helper()
	resp, err := svc.call(request("scale", withHits(desc(key, value), 0)))
	if err != nil {
		t.Fatalf("peek %s=%s: %v", key, value, err)
	}
	return uint64(resp.GetStatuses()[0].GetLimitRemaining())
}

// One Cluster of 3 masters + 3 replicas: a domain's counters spread over
// every master, a request across 3 masters is all-or-nothing at one script
// per master, and killing the hot master under load costs errors only until
// its replica is promoted (+1 s), never a call past its deadline nor a hit
// charged twice.
func TestClusterScaleOut(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartClusterWithReplicas(t, 3, 1, time.Second)
	r := &scaleRig{clients: redistest.Clients(t, nodes)}
	for i, n := range nodes {
		c := r.clients[i]
		if role, _ := c.Do(context.Background(), "ROLE").Slice(); len(role) > 0 && role[0] == "master" {
			r.masters = append(r.masters, c)
			r.masterNodes = append(r.masterNodes, n)
		}
	}
	if len(r.masters) != 3 {
		t.Fatalf("%d masters, want 3", len(r.masters))
	}
	root, _ := newConfigRoot(t, map[string]string{"scale.yaml": scaleConfig})
	r.svc = startService(t, root, "REDIS_TYPE=CLUSTER", "REDIS_URL="+redistest.Addrs(nodes), "REDIS_TIMEOUT=1s")
	t.Run("spread", r.spread)
	t.Run("cross-slot all-or-nothing and round trips", r.crossSlot)
	t.Run("master kill under load", r.masterKill)
}

// scaleRig is TestClusterScaleOut's Cluster and binary.
type scaleRig struct {
	svc         *service
	clients     []*redis.Client // every node
	masters     []*redis.Client
	masterNodes []*redistest.Server
}

func (r *scaleRig) spread(t *testing.T) {
	for i := range 1000 {
		if resp, err := r.svc.call(request("scale", desc("user", "u"+strconv.Itoa(i)))); err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("user %d: %v %v", i, resp, err)
		}
	}
	var sizes []int64
	for _, m := range r.masters {
		n, err := m.DBSize(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, n)
	}
	t.Logf("1000 counters of one rule, DBSIZE per master: %v", sizes)
	for i, n := range sizes {
		if n < 267 || n > 400 {
			t.Errorf("master %d holds %d of 1000 counters, want 333 +-20%%", i, n)
		}
	}
}

func (r *scaleRig) crossSlot(t *testing.T) {
	vals := []string{valueOn(t, r.masters, 0, "a", scaleKeyOf("small", "fixed_window")), valueOn(t, r.masters, 1, "b", scaleKeyOf("small", "fixed_window")), valueOn(t, r.masters, 2, "c", scaleKeyOf("small", "fixed_window"))}
	// Admissions (the request's hits_addend): a descriptor's own
	// hits_addend would be usage, recorded and never undone.
	three := func(hits uint32) *rlsv3.RateLimitRequest {
		r := request("scale", desc("small", vals[0]), desc("small", vals[1]), desc("small", vals[2]))
		r.HitsAddend = hits
		return r
	}
	// Warm the take and undo scripts on every master (an exhausted
	// counter beside two others denies and undoes on their r.masters).
	for i := range vals {
		exhaust := request("scale", desc("small", vals[i]))
		exhaust.HitsAddend = 3
		r.svc.call(exhaust)
		r.svc.call(three(1))
	}
	for _, m := range r.masters {
		m.FlushAll(context.Background())
		m.ConfigResetStat(context.Background())
	}
	if resp, err := r.svc.call(request("scale", desc("small", vals[0]))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("one descriptor: %v %v", resp, err)
	}
	oneRT := clusterScriptCalls(t, r.masters)
	for _, m := range r.masters {
		m.ConfigResetStat(context.Background())
	}
	if resp, err := r.svc.call(three(1)); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("three descriptors on three r.masters: %v %v", resp, err)
	}
	threeRT := clusterScriptCalls(t, r.masters)
	t.Logf("Redis scripts (FCALL+EVALSHA+EVAL over all r.masters, INFO commandstats) per request: 1 descriptor = %d, 3 descriptors on 3 r.masters = %d", oneRT, threeRT)
	if oneRT != 1 || threeRT != 3 {
		t.Errorf("scripts per request: %d and %d, want 1 and 3", oneRT, threeRT)
	}
	// vals[0] now has 1 left; asking 2 of it denies the whole request.
	before := []uint64{remaining(t, r.svc, "small", vals[0]), remaining(t, r.svc, "small", vals[1]), remaining(t, r.svc, "small", vals[2])}
	for _, m := range r.masters {
		m.ConfigResetStat(context.Background())
	}
	resp, err := r.svc.call(three(2))
	if err != nil || resp.GetOverallCode() != over {
		t.Fatalf("one exhausted counter: %v %v, want OVER_LIMIT", resp, err)
	}
	deniedRT := clusterScriptCalls(t, r.masters)
	after := []uint64{remaining(t, r.svc, "small", vals[0]), remaining(t, r.svc, "small", vals[1]), remaining(t, r.svc, "small", vals[2])}
	t.Logf("denied 3-master request: %d scripts (3 takes + 2 undos); remaining before %v, after %v", deniedRT, before, after)
	if deniedRT != 5 {
		t.Errorf("denied 3-master request ran %d scripts, want 5", deniedRT)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("denied request changed counters: %v -> %v", before, after)
	}
}
