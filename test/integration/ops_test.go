package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

func TestGrpcurlWithoutProtoFiles(t *testing.T) {
	t.Parallel()
	needGrpcurl(t)
	svc, _ := startWithRedis(t, itConfig)
	out, err := exec.Command(grpcurlPath, "-plaintext", svc.grpcAddr, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl list: %v\n%s", err, out)
	}
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("grpcurl list lacks %s:\n%s", want, out)
		}
	}
	body := `{"domain":"it","descriptors":[{"entries":[{"key":"a_b","value":"grpcurl"}]}]}`
	var overall []string
	for range 2 {
		out, err := exec.Command(grpcurlPath, "-plaintext", "-d", body, svc.grpcAddr,
			"envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit").CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl call: %v\n%s", err, out)
		}
		var resp struct{ OverallCode string }
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("grpcurl output %q: %v", out, err)
		}
		overall = append(overall, resp.OverallCode)
	}
	if overall[0] != "OK" || overall[1] != "OVER_LIMIT" {
		t.Fatalf("grpcurl overall codes %v, want [OK OVER_LIMIT]", overall)
	}
	health := grpc_health_v1.NewHealthClient(svc.conn)
	hr, err := health.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health: %v %v", hr, err)
	}
}

// countAdmitted runs clients goroutines spread over the services, each
// sending perClient requests for d, and returns how many were admitted.
func countAdmitted(t *testing.T, services []*service, clients, perClient int, req *rlsv3.RateLimitRequest) int64 {
	t.Helper()
	var admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func(svc *service) {
			defer wg.Done()
			for range perClient {
				resp, err := svc.call(req)
				switch {
				case err != nil:
					failed.Add(1)
				case resp.GetOverallCode() == ok:
					admitted.Add(1)
				}
			}
		}(services[c%len(services)])
	}
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d calls failed", f)
	}
	return admitted.Load()
}

func TestReplicasShareOneRedisExactly(t *testing.T) {
	t.Parallel()
	rds := redistest.Start(t)
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	env := []string{"REDIS_URL=" + rds.Addr, "REDIS_TYPE=SINGLE", "REDIS_POOL_SIZE=32"}
	var services []*service
	for range 3 {
		services = append(services, startService(t, root, env...))
	}
	t.Run("two replicas, global counter", func(t *testing.T) {
		got := countAdmitted(t, services[:2], 50, 4, request("it", desc("global", "x")))
		if got != 100 {
			t.Fatalf("admitted %d of 200 across two replicas, want exactly 100", got)
		}
	})
	for _, alg := range []string{"fixed_window", "sliding_log", "token_bucket"} {
		t.Run("3 replicas x 200 clients "+alg, func(t *testing.T) {
			got := countAdmitted(t, services, 200, 2, request("it", desc("alg", alg)))
			if got != 100 {
				t.Fatalf("%s admitted %d of 400, want exactly 100", alg, got)
			}
		})
	}
}

func TestHotReload(t *testing.T) {
	t.Parallel()
	rds := redistest.StartProcess(t)
	v1 := "domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
	v2 := "domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 5}\n"
	bad := "domain: reload\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n"
	root, dir := newConfigRoot(t, map[string]string{"r.yaml": v1})
	svc := startService(t, root, "REDIS_URL="+rds.Addr)
	limitOf := func() uint32 {
		resp, err := svc.call(request("reload", withHits(desc("k", "v"), 0)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	if got := limitOf(); got != 1 {
		t.Fatalf("initial limit %d", got)
	}
	writeFile(t, filepath.Join(dir, "r.yaml"), v2)
	testkit.WaitFor(t, 10*time.Second, "the good file to be loaded", func() bool { return limitOf() == 5 })

	writeFile(t, filepath.Join(dir, "r.yaml"), bad)
	testkit.WaitFor(t, 10*time.Second, "the bad file to be reported", func() bool {
		return strings.Contains(svc.logs.String(), "r.yaml:4")
	})
	if got := limitOf(); got != 5 {
		t.Fatalf("after a bad file the limit is %d, want the last good 5", got)
	}

	// SIGHUP reloads even when no file event arrives.
	if err := os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	svc.signal(syscall.SIGHUP)
	testkit.WaitFor(t, 10*time.Second, "SIGHUP reload", func() bool { return limitOf() == 1 })
}

func TestRedisFailureIsUnavailableWithinDeadline(t *testing.T) {
	t.Parallel()
	svc, rds := startWithRedis(t, itConfig, "REDIS_TIMEOUT=10s")
	if _, err := svc.call(request("it", desc("global", "before"))); err != nil {
		t.Fatalf("before kill: %v", err)
	}
	rds.Stop()
	for _, deadline := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		resp, err := svc.client.ShouldRateLimit(ctx, request("it", desc("global", "during")))
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Fatalf("deadline %s: got a response %v with Redis down", deadline, resp)
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
			t.Fatalf("deadline %s: code %v, want Unavailable or DeadlineExceeded", deadline, c)
		}
		if took > deadline+testkit.Slack {
			t.Fatalf("deadline %s: answered after %s", deadline, took)
		}
	}
	// Without a caller deadline REDIS_TIMEOUT still bounds the wait: Unavailable, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := svc.client.ShouldRateLimit(ctx, request("it", desc("global", "during")))
	cancel()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Redis down, long deadline: %v, want Unavailable", err)
	}
	rds.Restart(t)
	testkit.WaitFor(t, 15*time.Second, "recovery after Redis restart", func() bool {
		resp, err := svc.call(request("it", desc("global", "after")))
		return err == nil && resp.GetOverallCode() == ok
	})
}

func TestEmbeddedStoreWithoutRedis(t *testing.T) {
	t.Parallel()
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	svc := startService(t, root, "REDIS_URL=", "BACKEND_TYPE=")
	var got []rlsv3.RateLimitResponse_Code
	for range 4 {
		resp, err := svc.call(request("it", desc("generic_key", "fixed")))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.GetOverallCode())
	}
	if !equal(got, []rlsv3.RateLimitResponse_Code{ok, ok, ok, over}) {
		t.Fatalf("embedded store: %v", got)
	}
}
