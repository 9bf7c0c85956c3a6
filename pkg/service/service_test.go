package service_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

const apiYAML = `
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1
`

func parse(t *testing.T, yaml string) *service.Rules {
	t.Helper()
	r, err := service.ParseRules(service.RulesFile{Name: "api.yaml", YAML: []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newService(t *testing.T, rules *service.Rules, opts ...service.Option) (*service.Service, *memstore.Store) {
	t.Helper()
	// A fixed clock, so no test sees its one-minute windows end between
	// two calls.
	st := memstore.New(memstore.WithClock(storetest.Epoch))
	t.Cleanup(func() { st.Close() })
	svc, err := service.New(rules, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

func request(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}},
	}}}
}

func decide(t *testing.T, svc *service.Service, user string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	resp, err := svc.ShouldRateLimit(context.Background(), request(user))
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetOverallCode()
}

// TestSetRules: without rules the Service is unhealthy and answers
// Unavailable; SetRules brings it up and a later SetRules takes effect on
// the next request.
func TestSetRules(t *testing.T) {
	svc, _ := newService(t, nil)
	if svc.Healthy() {
		t.Error("healthy without rules")
	}
	if _, err := svc.ShouldRateLimit(context.Background(), request("a")); status.Code(err) != codes.Unavailable {
		t.Fatalf("without rules: %v, want Unavailable", err)
	}
	svc.SetRules(parse(t, apiYAML))
	if !svc.Healthy() {
		t.Error("unhealthy with rules")
	}
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first request: %v", got)
	}
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second request: %v", got)
	}
	svc.SetRules(parse(t, "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unlimited: true\n"))
	if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after SetRules(unlimited): %v", got)
	}
	svc.SetRules(nil)
	if _, err := svc.ShouldRateLimit(context.Background(), request("a")); status.Code(err) != codes.Unavailable {
		t.Fatalf("after SetRules(nil): %v, want Unavailable", err)
	}
}

// TestLoadRules reads a directory as the daemon does, and a bad file's
// error names it.
func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte(apiYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := service.LoadRules(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules.Domains(); len(got) != 1 || got[0] != "api" {
		t.Errorf("Domains() = %v, want [api]", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("domain: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := service.LoadRules(dir); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("LoadRules with a bad file: %v, want an error naming bad.yaml", err)
	}
}

// TestOptions: each option reaches the service it configures.
func TestOptions(t *testing.T) {
	t.Run("key prefix", func(t *testing.T) {
		svc, st := newService(t, parse(t, apiYAML), service.WithKeyPrefix("tenant1:"))
		decide(t, svc, "a")
		keys, _, err := st.List(context.Background(), "tenant1:", "", 10, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 {
			t.Errorf("keys under tenant1: = %v, want one", keys)
		}
	})
	t.Run("shadow mode", func(t *testing.T) {
		svc, _ := newService(t, parse(t, apiYAML), service.WithShadowMode(true))
		decide(t, svc, "a")
		if got := decide(t, svc, "a"); got != rlsv3.RateLimitResponse_OK {
			t.Errorf("over the limit in shadow mode: %v, want OK", got)
		}
	})
	t.Run("headers", func(t *testing.T) {
		svc, _ := newService(t, parse(t, apiYAML), service.WithHeaders(service.Headers{Classic: true, Limit: "X-Limit"}))
		resp, err := svc.ShouldRateLimit(context.Background(), request("a"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range resp.GetResponseHeadersToAdd() {
			names = append(names, h.GetKey())
		}
		if !strings.Contains(strings.Join(names, ","), "X-Limit") {
			t.Errorf("headers %v, want X-Limit among them", names)
		}
	})
	t.Run("limits", func(t *testing.T) {
		svc, _ := newService(t, parse(t, apiYAML), service.WithLimits(0, 0, 3))
		if _, err := svc.ShouldRateLimit(context.Background(), request("alice")); status.Code(err) != codes.InvalidArgument {
			t.Errorf("value over the cap: %v, want InvalidArgument", err)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		svc, _ := newService(t, parse(t, apiYAML), service.WithMetrics(reg))
		decide(t, svc, "a")
		decide(t, svc, "a")
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var over float64
		for _, f := range families {
			if f.GetName() == "ratelimitd_over_limit_total" {
				for _, m := range f.GetMetric() {
					over += m.GetCounter().GetValue()
				}
			}
		}
		if over != 1 {
			t.Errorf("ratelimitd_over_limit_total = %v, want 1", over)
		}
		if _, err := service.New(nil, memstore.New(), service.WithMetrics(reg)); err == nil {
			t.Error("a second Service on the same registry: no error")
		}
	})
}

// TestServeGRPC serves the Service to a gRPC client as it would to Envoy.
func TestServeGRPC(t *testing.T) {
	svc, _ := newService(t, parse(t, apiYAML))
	srv := grpc.NewServer(svc.GRPCServerOptions()...)
	svc.RegisterGRPC(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := client.ShouldRateLimit(context.Background(), request("a"))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetOverallCode(); got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}
