package admin_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

const token = "s3cret-admin-token-0123456789"

const rules = `
domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: vip
    rate_limit: {unlimited: true}
  - key: team
    rate_limits:
      - {unit: second, requests_per_unit: 100}
      - {unit: minute, requests_per_unit: 2}
`

// rig is a service and its counters API over one memstore.
type rig struct {
	svc   *service.Service
	admin *admin.Server
	reg   *prometheus.Registry
	logs  *observer.ObservedLogs
}

func newRig(t *testing.T, auth admin.Auth) *rig {
	t.Helper()
	parsed, err := service.ParseRules(service.RulesFile{Name: "d.yaml", YAML: []byte(rules)})
	if err != nil {
		t.Fatal(err)
	}
	// A fixed clock: on the wall clock a test that crossed a minute
	// boundary saw every counter's window end.
	st := memstore.New(memstore.WithClock(storetest.Epoch))
	t.Cleanup(func() { _ = st.Close() })
	keys := config.KeyBuilder{Prefix: "rl:"}
	svc, err := service.New(parsed, st, service.WithKeyPrefix(keys.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	a := admin.New(svc, st, auth, admin.WithKeyBuilder(keys), admin.WithLogger(zap.New(core)))
	reg := prometheus.NewRegistry()
	if err := a.Register(reg); err != nil {
		t.Fatal(err)
	}
	return &rig{svc: svc, admin: a, reg: reg, logs: logs}
}

func (r *rig) hit(t *testing.T, user string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	return r.hitKey(t, "user", user)
}

func (r *rig) hitKey(t *testing.T, key, value string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	resp, err := r.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetOverallCode()
}

// serve runs a gRPC server with the counters API on 127.0.0.1.
func serve(t *testing.T, a *admin.Server, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	a.RegisterGRPC(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func client(t *testing.T, addr string, creds credentials.TransportCredentials) adminv1.CountersClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return adminv1.NewCountersClient(conn)
}

func bearer(t *testing.T, tok string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func descs(kv ...string) []*adminv1.Descriptor {
	var out []*adminv1.Descriptor
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &adminv1.Descriptor{Entries: []*adminv1.Entry{{Key: kv[i], Value: kv[i+1]}}})
	}
	return out
}

func TestGRPCTokenGetResetList(t *testing.T) {
	r := newRig(t, admin.NewAuth([]byte(token), nil))
	c := client(t, serve(t, r.admin), insecure.NewCredentials())
	for range 3 {
		r.hit(t, "alice")
	}
	if r.hit(t, "alice") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatal("alice not over her limit of 3")
	}
	r.hit(t, "bob")

	refuseAll(t, c)
	if r.hit(t, "alice") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatal("a refused Reset gave alice her quota back")
	}

	got, err := c.Get(bearer(t, token), &adminv1.GetRequest{Domain: "d", Descriptors: descs("user", "alice", "user", "bob", "vip", "x", "nope", "x")})
	if err != nil {
		t.Fatal(err)
	}
	a, b := got.GetCounters()[0], got.GetCounters()[1]
	if a.GetStatus() != adminv1.Status_COUNTED || a.GetUsed() != 3 || a.GetRemaining() != 0 || a.GetKey() != "rl:{d:4:user:5:alice}:fixed_window.int:60s" ||
		a.GetRule().GetAlgorithm() != "fixed_window" || a.GetRule().GetCapacity() != 3 || a.GetRule().GetMode() != "ENFORCE" || a.GetResetAfter().AsDuration() <= 0 {
		t.Errorf("alice: %v", a)
	}
	if b.GetUsed() != 1 || b.GetRemaining() != 2 || b.GetOverLimit() {
		t.Errorf("bob: %v", b)
	}
	if got.GetCounters()[2].GetStatus() != adminv1.Status_UNLIMITED || got.GetCounters()[3].GetStatus() != adminv1.Status_NO_RULE {
		t.Errorf("vip and nope: %v", got.GetCounters()[2:])
	}

	list, err := c.List(bearer(t, token), &adminv1.ListRequest{Domain: "d"})
	if err != nil || len(list.GetCounters()) != 2 || list.GetNextPageToken() != "" {
		t.Fatalf("List: %v, %v; want alice's and bob's counters", list, err)
	}
	for _, lc := range list.GetCounters() {
		if v := lc.GetEntries()[0].GetValue(); lc.GetEntries()[0].GetKey() != "user" || (v != "alice" && v != "bob") || lc.GetPeriod().AsDuration() != time.Minute {
			t.Errorf("listed %v", lc)
		}
	}

	reset, err := c.Reset(bearer(t, token), &adminv1.ResetRequest{Domain: "d", Descriptors: descs("user", "alice", "user", "carol")})
	if err != nil || reset.GetDeleted() != 1 || !reset.GetCounters()[0].GetExisted() || reset.GetCounters()[1].GetExisted() {
		t.Fatalf("Reset: %v, %v", reset, err)
	}
	if r.hit(t, "alice") != rlsv3.RateLimitResponse_OK {
		t.Error("alice still over her limit after the reset")
	}
	if n := testutil.ToFloat64(mustCounter(t, r.reg, "ratelimitd_admin_resets_total")); n != 1 {
		t.Errorf("resets_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(mustCounter(t, r.reg, "ratelimitd_admin_unauthenticated_total")); n != 9 {
		t.Errorf("unauthenticated_total = %v, want 9", n)
	}
	audit := r.logs.FilterMessage("counters reset").All()
	if len(audit) != 1 || audit[0].ContextMap()["domain"] != "d" || !strings.HasPrefix(audit[0].ContextMap()["by"].(string), "token@127.0.0.1:") {
		t.Errorf("audit lines: %v", audit)
	}
	for _, e := range r.logs.All() {
		for _, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, token) {
				t.Errorf("the token was logged: %v", e)
			}
		}
	}
}

// A descriptor with several limits (rate_limits) is read as the limit that
// decides it and reset whole: every limit's counter goes.
func TestSeveralLimitsGetAndReset(t *testing.T) {
	r := newRig(t, admin.NewAuth([]byte(token), nil))
	c := client(t, serve(t, r.admin), insecure.NewCredentials())
	r.hitKey(t, "team", "a")
	r.hitKey(t, "team", "a")
	if r.hitKey(t, "team", "a") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatal("team a not over its 2 a minute")
	}
	got, err := c.Get(bearer(t, token), &adminv1.GetRequest{Domain: "d", Descriptors: descs("team", "a")})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.GetCounters()[0]; g.GetRemaining() != 0 || g.GetUsed() != 2 {
		t.Errorf("Get answers %v, want the minute limit's 2 used, 0 left", g)
	}
	reset, err := c.Reset(bearer(t, token), &adminv1.ResetRequest{Domain: "d", Descriptors: descs("team", "a")})
	if err != nil || reset.GetDeleted() != 2 || !reset.GetCounters()[0].GetExisted() {
		t.Fatalf("Reset: %v, %v; want both limits' counters deleted", reset, err)
	}
	if r.hitKey(t, "team", "a") != rlsv3.RateLimitResponse_OK {
		t.Error("team a still over a limit after the reset")
	}
}

// refuseAll checks every call without the token, with a wrong one and with
// one of another length: 9 refusals.
func refuseAll(t *testing.T, c adminv1.CountersClient) {
	t.Helper()
	for name, ctx := range map[string]context.Context{"none": context.Background(), "wrong": bearer(t, token[:len(token)-1]+"x"), "short": bearer(t, "x")} {
		_, err := c.Reset(ctx, &adminv1.ResetRequest{Domain: "d", Descriptors: descs("user", "alice")})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Reset with %s token: %v, want UNAUTHENTICATED", name, err)
		}
		for _, call := range []func() error{
			func() error {
				_, err := c.Get(ctx, &adminv1.GetRequest{Domain: "d", Descriptors: descs("user", "alice")})
				return err
			},
			func() error { _, err := c.List(ctx, &adminv1.ListRequest{Domain: "d"}); return err },
		} {
			if err := call(); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s token: %v, want UNAUTHENTICATED", name, err)
			}
		}
	}
}

// mustCounter sums a metric family's counters.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	c.Add(sum)
	return c
}
