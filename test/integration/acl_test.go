package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// aclConfig has a counter of every algorithm, a hot one that leases, one
// the local cache holds and one that falls back to local counting (the
// replicas' presence).
const aclConfig = `domain: acl
descriptors:
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: budget
    rate_limit: {unit: day, requests_per_unit: 10}
  - key: hot
    lease: true
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token_bucket}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: gcra}
  - key: lb
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: leaky_bucket}
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 5, on_store_error: local}
`

// aclBlock is the first line of docs/redis.md's code block of that info
// string, split into words.
func aclBlock(t *testing.T, info string) []any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "redis.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "```"+info+"\n")
	line, _, _ := strings.Cut(block, "\n")
	if !ok || line == "" {
		t.Fatalf("docs/redis.md has no %s block", info)
	}
	var args []any
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	return args
}

// aclUser is docs/redis.md's least-privilege ACL SETUSER line (its acl
// block), with the password and the notices' channel under prefix.
func aclUser(t *testing.T, password, prefix string) []any {
	t.Helper()
	words := aclBlock(t, "acl")
	if words[0] != "ACL" || words[1] != "SETUSER" {
		t.Fatal("docs/redis.md's acl block is no ACL SETUSER line")
	}
	var args []any
	for _, w := range words {
		f := w.(string)
		switch f {
		case ">PASSWORD":
			f = ">" + password
		case "&ratelimitd:refunds":
			f = "&" + prefix + "ratelimitd:refunds"
		}
		args = append(args, f)
	}
	return args
}

// TestLeastPrivilegeACL runs two replicas (local cache, leases, the
// counters API, the delay queue, CACHE_KEY_PREFIX) as docs/redis.md's
// least-privilege user on a single Redis, a Sentinel's master and a
// 3-master Cluster (with the Cluster's additions, on every node): every
// decision, refund, reset and queue call is answered, the refund and the
// reset reach the other replica's cache, and Redis refused nothing (empty
// ACL LOGs, no NOPERM in the logs, no notice errors counted).
func TestLeastPrivilegeACL(t *testing.T) {
	t.Parallel()
	for _, be := range []backend{redisBackend, sentinelBackend, clusterBackend} {
		t.Run(be.name, func(t *testing.T) { testACL(t, be) })
	}
}

func testACL(t *testing.T, be backend) {
	beEnv, nodes := be.start(t)
	admins := redistest.Clients(t, nodes)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	user := aclUser(t, "s3cret-acl", "rl:")
	if be.cluster {
		user = append(user, aclBlock(t, "acl-cluster")...)
	}
	for _, admin := range admins {
		if err := admin.Do(ctx, user...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := newConfigRoot(t, map[string]string{"acl.yaml": aclConfig})
	env := append(beEnv, "REDIS_AUTH=ratelimitd:s3cret-acl", "CACHE_KEY_PREFIX=rl:", "LOCAL_CACHE_SIZE_IN_BYTES=1048576",
		"LOCAL_CACHE_MAX_AGE=1h", "LEASE_ENABLED=true", "ADMIN_TOKEN_FILE="+tokenFile(t, adminToken), "LOG_FORMAT=json",
		"LOCAL_FALLBACK_HEARTBEAT=50ms")
	a := startService(t, root, env...)
	b := startService(t, root, env...)
	roomInWindow(t, time.Hour, 20*time.Second)

	aclDecisions(t, a)
	aclRefundAndReset(t, ctx, a, b)
	aclQueue(t, ctx, a, b)
	aclPresence(t, ctx, admins)

	for i, admin := range admins {
		entries, err := admin.Do(ctx, "ACL", "LOG").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Errorf("Redis %s refused the ratelimitd user %d times: %v", nodes[i].Addr, len(entries), entries)
		}
	}
	for name, svc := range map[string]*service{"A": a, "B": b} {
		if logs := svc.logs.String(); strings.Contains(logs, "NOPERM") {
			t.Errorf("replica %s logged NOPERM:\n%s", name, logs)
		}
		metrics := scrape(t, svc)
		for _, op := range []string{"publish", "subscribe"} {
			if want := `ratelimitd_local_cache_notice_errors_total{op="` + op + `"} 0`; !strings.Contains(metrics, want) {
				t.Errorf("replica %s's /metrics lacks %s", name, want)
			}
		}
	}
	if !be.cluster && len(nodes) == 1 && be.name == "redis" {
		aclWithoutChannel(t, ctx, admins[0], nodes[0].Addr)
	}
}

// aclWithoutChannel runs a replica as a user refused the notices' channel:
// a refund of a spent counter is answered OK with its room all the same,
// and the refused PUBLISH is counted and logged, as is the subscription.
func aclWithoutChannel(t *testing.T, ctx context.Context, admin *redis.Client, addr string) {
	t.Helper()
	user := aclUser(t, "s3cret-acl", "nowhere:")
	user[2] = "deaf"
	if err := admin.Do(ctx, user...).Err(); err != nil {
		t.Fatal(err)
	}
	c := startWithRedisAt(t, addr, aclConfig, "REDIS_AUTH=deaf:s3cret-acl", "LOCAL_CACHE_SIZE_IN_BYTES=1048576")
	if resp, err := c.call(request("acl", withHits(desc("budget", "deaf"), 10))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("10 hits of 10: %v, %v", resp, err)
	}
	refund := withHits(desc("budget", "deaf"), 4)
	refund.IsNegativeHits = true
	if resp, err := c.call(request("acl", refund)); err != nil || resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Fatalf("a refund whose notice is refused: %v, %v; want OK with 4 left", resp, err)
	}
	// Published in the background, after the answer.
	want := `ratelimitd_local_cache_notice_errors_total{op="publish"} 1`
	testkit.WaitFor(t, 10*time.Second, want, func() bool { return strings.Contains(scrape(t, c), want) })
	metrics := scrape(t, c)
	if !strings.Contains(metrics, `ratelimitd_local_cache_notice_errors_total{op="subscribe"} `) ||
		strings.Contains(metrics, `ratelimitd_local_cache_notice_errors_total{op="subscribe"} 0`) {
		t.Errorf("the refused subscription is not counted")
	}
	logs := c.logs.String()
	if !strings.Contains(logs, "local cache notice not published") || !strings.Contains(logs, "subscription failed") {
		t.Errorf("the refused notice and subscription are not logged:\n%s", logs)
	}
}
