package integration

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestCheckCommand(t *testing.T) {
	_, good := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	out, err := exec.Command(binPath, "check", "--config", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK, 1 domain(s): it") {
		t.Fatalf("check of a good directory: %v\n%s", err, out)
	}
	_, bad := newConfigRoot(t, map[string]string{
		"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
		"b.yaml": "domain: b\nnot_a_key: 1\n",
	})
	out, err = exec.Command(binPath, "check", "--config", bad).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check of a bad directory: err %v, want exit code 1\n%s", err, out)
	}
	for _, want := range []string{filepath.Join(bad, "a.yaml") + ":4", "unit", "b.yaml:2", "not_a_key"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestForceStartWithoutInitialConfig(t *testing.T) {
	root, dir := newConfigRoot(t, map[string]string{"it.yaml": "domain: it\nbogus: true\n"})
	svc := spawnService(t, root, "FORCE_START_WITHOUT_INITIAL_CONFIG=true", "BACKEND_TYPE=memory")
	eventually(t, 15*time.Second, "the HTTP port to answer", func() bool { return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") != 0 })
	if code := httpStatus(t, "http://"+svc.httpAddr+"/healthcheck"); code != http.StatusInternalServerError {
		t.Fatalf("healthcheck without a config: %d, want 500", code)
	}
	health := grpc_health_v1.NewHealthClient(svc.conn)
	if hr, err := health.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}); err != nil || hr.GetStatus() != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health without a config: %v %v, want NOT_SERVING", hr, err)
	}
	if _, err := svc.call(request("it", desc("generic_key", "fixed"))); status.Code(err) != codes.Unavailable {
		t.Fatalf("call without a config: %v, want Unavailable", err)
	}
	writeFile(t, filepath.Join(dir, "it.yaml"), itConfig)
	svc.waitHealthy(10 * time.Second)
	eventually(t, 5*time.Second, "gRPC health SERVING", func() bool {
		hr, err := health.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
		return err == nil && hr.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
	})
	if resp, err := svc.call(request("it", desc("generic_key", "fixed"))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("call after the first good config: %v %v", resp, err)
	}
}

func TestWithoutForceStartABadConfigFailsTheStart(t *testing.T) {
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": "domain: it\nbogus: true\n"})
	cmd := exec.Command(binPath)
	cmd.Env = append(cmd.Environ(), "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "BACKEND_TYPE=memory",
		"GRPC_PORT=0", "PORT=0", "DEBUG_PORT=0", "GRPC_HOST=127.0.0.1", "HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "it.yaml:2") {
		t.Fatalf("start with a bad config: err %v, want a failure naming it.yaml:2\n%s", err, out)
	}
}

func TestHealthyWithAtLeastOneConfigLoaded(t *testing.T) {
	root, dir := newConfigRoot(t, map[string]string{})
	svc := spawnService(t, root, "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true", "BACKEND_TYPE=memory")
	eventually(t, 15*time.Second, "the HTTP port to answer", func() bool { return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") != 0 })
	if code := httpStatus(t, "http://"+svc.httpAddr+"/healthcheck"); code != http.StatusInternalServerError {
		t.Fatalf("healthcheck with no domain loaded: %d, want 500", code)
	}
	writeFile(t, filepath.Join(dir, "it.yaml"), itConfig)
	svc.waitHealthy(10 * time.Second)
}
