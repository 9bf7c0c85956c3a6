package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
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

// aclDecisions: every algorithm decides, in one request and on its own,
// and the hot counter leases.
func aclDecisions(t *testing.T, svc *service) {
	t.Helper()
	var all []string
	for _, k := range []string{"fw", "sw", "log", "tb", "gcra", "lb", "local"} {
		all = append(all, k, "x")
		if resp, err := svc.call(request("acl", desc(k, "x"))); err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("%s: %v, %v", k, resp, err)
		}
	}
	var descs []*rlcommon.RateLimitDescriptor
	for i := 0; i < len(all); i += 2 {
		descs = append(descs, desc(all[i], all[i+1]))
	}
	if resp, err := svc.call(request("acl", descs...)); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("every algorithm in one request: %v, %v", resp, err)
	}
	for i := range 50 {
		if resp, err := svc.call(request("acl", desc("hot", "x"))); err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("hot hit %d: %v, %v", i, resp, err)
		}
	}
}

// aclPresence waits for the replicas' presence to beat (MULTI and EXEC
// of the presence's sorted sets) with the ACL user, on whichever node
// holds it.
func aclPresence(t *testing.T, ctx context.Context, admins []*redis.Client) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "both replicas' presence", func() bool {
		for _, admin := range admins {
			if n, err := admin.ZCard(ctx, "rl:{ratelimitd}:replicas").Result(); err == nil && n == 2 {
				return true
			}
		}
		return false
	})
}

// aclRefundAndReset: B caches a spent budget; A's refund reaches it; B
// caches it spent again; A's counters reset reaches it.
func aclRefundAndReset(t *testing.T, ctx context.Context, a, b *service) {
	t.Helper()
	spendOn := func(who string) {
		spend := request("acl", withHits(desc("budget", "x"), 10))
		if resp, err := a.call(spend); err != nil || resp.GetOverallCode() != ok {
			t.Fatalf("%s: 10 hits of 10 on A: %v, %v", who, resp, err)
		}
		for i := range 2 { // Redis's denial, then B's cached one
			if resp, err := b.call(request("acl", desc("budget", "x"))); err != nil || resp.GetOverallCode() != over {
				t.Fatalf("%s: B's hit %d on a spent budget: %v, %v", who, i, resp, err)
			}
		}
	}
	spendOn("refund")
	refund := withHits(desc("budget", "x"), 4)
	refund.IsNegativeHits = true
	if resp, err := a.call(request("acl", refund)); err != nil || resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Fatalf("refund of 4 on A: %v, %v", resp, err)
	}
	waitAdmitted(t, b, "the refund")
	// B's hit above took one of the 4: spend the other 3 from A.
	if resp, err := a.call(request("acl", withHits(desc("budget", "x"), 3))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("3 more on A: %v, %v", resp, err)
	}
	if resp, err := b.call(request("acl", desc("budget", "x"))); err != nil || resp.GetOverallCode() != over {
		t.Fatalf("B on the spent budget again: %v, %v", resp, err)
	}
	c := adminv1.NewCountersClient(a.conn)
	if got, err := c.Get(withToken(ctx, adminToken), &adminv1.GetRequest{Domain: "acl", Descriptors: adminDescs("budget", "x")}); err != nil || got.GetCounters()[0].GetRemaining() != 0 {
		t.Fatalf("Get: %v, %v", got, err)
	}
	if listed := listAll(t, c, "acl", 2); !listed["x"] {
		t.Fatalf("List: %v, want the budget among them", listed)
	}
	if reset, err := c.Reset(withToken(ctx, adminToken), &adminv1.ResetRequest{Domain: "acl", Descriptors: adminDescs("budget", "x")}); err != nil || reset.GetDeleted() != 1 {
		t.Fatalf("Reset: %v, %v", reset, err)
	}
	waitAdmitted(t, b, "the reset")
}

// waitAdmitted waits until b admits a hit of the budget again.
func waitAdmitted(t *testing.T, b *service, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := b.call(request("acl", desc("budget", "x")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() == ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica B still answers the budget OVER_LIMIT after %s", after)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// aclQueue: a message enqueued on A is claimed on B (a long poll the
// queue's notify channel wakes) and acked.
func aclQueue(t *testing.T, ctx context.Context, a, b *service) {
	t.Helper()
	qa, qb := queuev1.NewDelayQueueClient(a.conn), queuev1.NewDelayQueueClient(b.conn)
	claimed := make(chan *queuev1.ClaimResponse, 1)
	errs := make(chan error, 1)
	go func() {
		got, err := qb.Claim(ctx, &queuev1.ClaimRequest{Queue: "acl", MaxMessages: 1, Wait: durationpb.New(10 * time.Second)})
		claimed <- got
		errs <- err
	}()
	time.Sleep(100 * time.Millisecond) // B's long poll waits first
	if _, err := qa.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "acl", Id: "m1", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	got := <-claimed
	if err := <-errs; err != nil || len(got.GetMessages()) != 1 {
		t.Fatalf("Claim on B: %v, %v", got, err)
	}
	m := got.GetMessages()[0]
	if _, err := qb.Ack(ctx, &queuev1.AckRequest{Queue: "acl", Id: m.GetId(), Receipt: m.GetReceipt()}); err != nil {
		t.Fatal(err)
	}
}
