package integration

import (
	"context"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

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
