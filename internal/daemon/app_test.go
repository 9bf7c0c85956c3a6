package daemon

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// appConfig's limit is one an hour, not a minute: the tests that call k
// twice (OK, then OVER_LIMIT) run on the wall clock (or Redis TIME), and a
// window that ended between the calls would admit the second.
const appConfig = `
domain: app
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// startApp runs an app on loopback ports (with the embedded store unless env
// says otherwise) and returns it with a stop function that waits for serve to return.
func startApp(t *testing.T, env map[string]string) (a *app, counting *countingWatcher, hup chan<- os.Signal, stop func() error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(appConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0"}
	// No statsd agent runs beside the tests: send to none unless asked.
	env = maps.Clone(env)
	if _, ok := env["USE_STATSD"]; !ok {
		if env == nil {
			env = map[string]string{}
		}
		env["USE_STATSD"] = "false"
	}
	set, err := parseSettings(args, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	a, err = newApp(set, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.listen(); err != nil {
		t.Fatal(a.abort(err))
	}
	counting = &countingWatcher{configWatcher: a.watcher}
	a.watcher = counting
	ctx, cancel := context.WithCancel(context.Background())
	hupc := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.serve(ctx, hupc) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("serve did not return after cancel")
			}
		})
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return a, counting, hupc, stop
}

// countingWatcher counts Reload calls, to tell SIGHUP reloads from the
// watcher's own.
type countingWatcher struct {
	configWatcher
	reloads atomic.Int32
}

func (w *countingWatcher) Reload() error {
	w.reloads.Add(1)
	return w.configWatcher.Reload()
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestAppServesEverything(t *testing.T) {
	a, counting, hup, stop := startApp(t, nil)
	conn := dial(t, a.grpcLn.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	rls := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}},
	}}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.GetOverallCode() != want {
			t.Errorf("call %d: overall %v, want %v", i, resp.GetOverallCode(), want)
		}
	}

	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v; want SERVING", svc, resp.GetStatus(), err)
		}
	}

	checkReflectionLists(t, ctx, conn, "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health")

	httpBase := "http://" + a.httpLn.Addr().String()
	if code, body := httpGet(t, httpBase+"/healthcheck"); code != http.StatusOK || body != "OK" {
		t.Errorf("/healthcheck = %d %q", code, body)
	}
	resp, err := http.Post(httpBase+"/json", "application/json",
		bytes.NewBufferString(`{"domain":"app","descriptors":[{"entries":[{"key":"k","value":"w"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/json = %d, want 200", resp.StatusCode)
	}

	debugBase := "http://" + a.debugLn.Addr().String()
	if code, body := httpGet(t, debugBase+"/rlconfig"); code != http.StatusOK || !strings.Contains(body, "app") {
		t.Errorf("/rlconfig = %d %q, want the app domain", code, body)
	}
	if code, _ := httpGet(t, debugBase+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ = %d without DEBUG_PPROF, want 404", code)
	}

	// A changed file is picked up (by the watcher on its own, or by SIGHUP).
	newCfg := strings.Replace(appConfig, "requests_per_unit: 1", "requests_per_unit: 7", 1)
	if err := os.WriteFile(filepath.Join(a.set.ConfigDir, "config.yaml"), []byte(newCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	testkit.WaitFor(t, 5*time.Second, "SIGHUP reload", func() bool { return counting.reloads.Load() == 1 })
	testkit.WaitFor(t, 5*time.Second, "new config in /rlconfig", func() bool {
		_, body := httpGet(t, debugBase+"/rlconfig")
		return strings.Contains(body, "requests_per_unit=7")
	})

	if err := stop(); err != nil {
		t.Errorf("serve returned %v", err)
	}
	if a.svc.Healthy() {
		t.Error("still healthy after shutdown")
	}
	if _, err := http.Get(httpBase + "/healthcheck"); err == nil {
		t.Error("HTTP still listening after shutdown")
	}
}

// checkReflectionLists: reflection lists services, as `grpcurl -plaintext
// ... list` asks.
func checkReflectionLists(t *testing.T, ctx context.Context, conn *grpc.ClientConn, services ...string) {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	refl, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range refl.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range services {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	_ = stream.CloseSend()
}

func TestAppWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	a, _, _, stop := startApp(t, map[string]string{"REDIS_URL": srv.Addr, "REDIS_TIMEOUT": "2s", "CACHE_KEY_PREFIX": "t_"})
	if a.set.Backend != backendRedis {
		t.Fatalf("backend = %v, want redis", a.set.Backend)
	}
	rls := rlsv3.NewRateLimitServiceClient(dial(t, a.grpcLn.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "app", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "redis"}},
	}}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.GetOverallCode() != want {
			t.Errorf("call %d: overall %v, want %v", i, resp.GetOverallCode(), want)
		}
	}

	// Redis down: an error Envoy can act on, quickly, never an OK.
	srv.Stop()
	start := time.Now()
	_, err := rls.ShouldRateLimit(ctx, req)
	if code := status.Code(err); code != codes.Unavailable {
		t.Errorf("with Redis down: %v, want Unavailable", err)
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("with Redis down the call took %v, more than REDIS_TIMEOUT", elapsed)
	}
	if err := stop(); err != nil {
		t.Errorf("serve returned %v", err)
	}
}
