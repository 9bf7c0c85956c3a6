package client_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/pkg/client"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuegrpc"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

var _ client.Backend = (*service.Service)(nil)

const adminToken = "0123456789abcdef-token"

const apiRules = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
`

// countingListener counts the connections a server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// daemon serves on one port what ratelimitd serves on its gRPC port: the
// RateLimitService, the counters API (with adminToken) and the delay
// queue, all in memory on a fixed clock.
func daemon(t *testing.T) *countingListener {
	t.Helper()
	rules, err := service.ParseRules(service.RulesFile{Name: "api.yaml", YAML: []byte(apiRules)})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.WithClock(storetest.Epoch))
	svc, err := service.New(rules, st, service.WithHeaders(service.Headers{Classic: true}))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	admin.New(svc, st, admin.NewAuth([]byte(adminToken), nil)).RegisterGRPC(srv)
	qs := memqueue.New()
	queuev1.RegisterDelayQueueServer(srv, queuegrpc.New(queue.NewBroker(qs)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingListener{Listener: ln}
	go func() { _ = srv.Serve(counting) }()
	t.Cleanup(func() {
		srv.Stop()
		_ = st.Close()
		_ = qs.Close()
	})
	return counting
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestOneConnection: decisions, the counters API and the delay queue go
// over the one connection Dial made, and the counters API sees what the
// decisions counted.
func TestOneConnection(t *testing.T) {
	ln := daemon(t)
	c := dial(t, ln.Addr().String(), client.WithAdminToken(adminToken))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	alice := client.Descriptor{{Key: "user", Value: "alice"}}
	l := client.NewLimiter(c, client.WithTimeout(10*time.Second))

	for want := 2; want >= 1; want-- {
		d := l.Check(ctx, "api", 0, alice)
		if d.Verdict != client.Admitted || d.Response.GetStatuses()[0].GetLimitRemaining() != uint32(want) {
			t.Fatalf("check: %v %v, want admitted with %d remaining", d.Verdict, d.Response, want)
		}
	}
	got, err := c.Counters().Get(ctx, "api", alice, client.Descriptor{{Key: "nobody", Value: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Status != adminv1.Status_COUNTED || got[0].Used != 2 || got[0].Remaining != 1 ||
		got[0].Rule.StatKey != "api.user" || got[0].Rule.Period != time.Minute || got[1].Status != adminv1.Status_NO_RULE {
		t.Fatalf("Get: %+v", got)
	}
	var listed []client.ListedCounter
	for k, err := range c.Counters().All(ctx, "api") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, k)
	}
	if len(listed) != 1 || listed[0].Key != got[0].Key || len(listed[0].Entries) != 1 || listed[0].Entries[0] != alice[0] {
		t.Fatalf("All: %+v, want alice's counter %s", listed, got[0].Key)
	}
	reset, deleted, err := c.Counters().Reset(ctx, "api", listed[0].Entries)
	if err != nil || deleted != 1 || !reset[0].Existed {
		t.Fatalf("Reset: %+v, %d deleted, %v", reset, deleted, err)
	}
	if d := l.Check(ctx, "api", 0, alice); d.Response.GetStatuses()[0].GetLimitRemaining() != 2 {
		t.Fatalf("after Reset: %v, want a fresh counter (2 remaining)", d.Response)
	}

	q := c.Queue()
	if _, err := q.Enqueue(ctx, queue.EnqueueRequest{Queue: "retry", ID: "job-1", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := q.Claim(ctx, queue.ClaimRequest{Queue: "retry", Max: 1, Visibility: time.Minute})
	if err != nil || len(msgs) != 1 || msgs[0].ID != "job-1" {
		t.Fatalf("Claim: %+v, %v", msgs, err)
	}
	if err := q.Ack(ctx, "retry", "job-1", msgs[0].Receipt); err != nil {
		t.Fatal(err)
	}

	if n := ln.accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

// TestCountersNeedTheToken: without the token, or with a wrong one, the
// counters API refuses and changes nothing.
func TestCountersNeedTheToken(t *testing.T) {
	ln := daemon(t)
	ctx := t.Context()
	alice := client.Descriptor{{Key: "user", Value: "alice"}}
	for _, opts := range [][]client.Option{nil, {client.WithAdminToken("wrong-token-0123456789")}} {
		c := dial(t, ln.Addr().String(), opts...)
		if _, err := c.Counters().Get(ctx, "api", alice); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Get: %v, want Unauthenticated", err)
		}
		if _, _, err := c.Counters().Reset(ctx, "api", alice); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Reset: %v, want Unauthenticated", err)
		}
		// The rest of the API needs no token.
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{alice.Proto()}})
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("ShouldRateLimit: %v, %v", resp, err)
		}
	}
	if _, _, err := dial(t, ln.Addr().String()).Counters().List(ctx, "api", -1, ""); err == nil {
		t.Error("List with a negative page size: no error")
	}
}
