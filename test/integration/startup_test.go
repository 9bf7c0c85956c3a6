package integration

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	_, good := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
	out, err := exec.Command(binPath, "check", "--config", good).CombinedOutput()
	if err != nil || !regexp.MustCompile(`: OK, 1 domain\(s\), \d+ rule\(s\): it \(\d+\)\n$`).Match(out) {
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
	t.Parallel()
	root, dir := newConfigRoot(t, map[string]string{"it.yaml": "domain: it\nbogus: true\n"})
	svc := spawnService(t, root, "FORCE_START_WITHOUT_INITIAL_CONFIG=true", "BACKEND_TYPE=memory")
	testkit.WaitFor(t, 15*time.Second, "the HTTP port to answer", func() bool { return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") != 0 })
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
	testkit.WaitFor(t, 5*time.Second, "gRPC health SERVING", func() bool {
		hr, err := health.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
		return err == nil && hr.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING
	})
	if resp, err := svc.call(request("it", desc("generic_key", "fixed"))); err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("call after the first good config: %v %v", resp, err)
	}
}

func TestWithoutForceStartABadConfigFailsTheStart(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	root, dir := newConfigRoot(t, map[string]string{})
	svc := spawnService(t, root, "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true", "BACKEND_TYPE=memory")
	testkit.WaitFor(t, 15*time.Second, "the HTTP port to answer", func() bool { return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") != 0 })
	if code := httpStatus(t, "http://"+svc.httpAddr+"/healthcheck"); code != http.StatusInternalServerError {
		t.Fatalf("healthcheck with no domain loaded: %d, want 500", code)
	}
	health := grpc_health_v1.NewHealthClient(svc.conn)
	grpcStatus := func() grpc_health_v1.HealthCheckResponse_ServingStatus {
		hr, err := health.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			return grpc_health_v1.HealthCheckResponse_UNKNOWN
		}
		return hr.GetStatus()
	}
	if got := grpcStatus(); got != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health with no domain loaded: %v, want NOT_SERVING", got)
	}
	writeFile(t, filepath.Join(dir, "it.yaml"), itConfig)
	svc.waitHealthy(10 * time.Second)
	testkit.WaitFor(t, 5*time.Second, "gRPC health SERVING", func() bool { return grpcStatus() == grpc_health_v1.HealthCheckResponse_SERVING })
	// Like envoyproxy, a later config without domains fails health again.
	if err := os.Remove(filepath.Join(dir, "it.yaml")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "health to fail with no domain", func() bool {
		return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") == http.StatusInternalServerError &&
			grpcStatus() == grpc_health_v1.HealthCheckResponse_NOT_SERVING
	})
}

// `ratelimitd check` reads the directory and MERGE_DOMAIN_CONFIG from the
// environment the service runs with, and takes envoyproxy's flags too.
func TestCheckCommandLikeTheService(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"a.yaml": "domain: shared\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n",
		"b.yaml": "domain: shared\ndescriptors:\n  - key: b\n    rate_limit: {unit: day, requests_per_unit: 2}\n",
	}
	root, dir := newConfigRoot(t, files)
	tests := []struct {
		name string
		args []string
		env  []string
		ok   bool
	}{
		{"RUNTIME_* names the directory; two files share a domain", []string{"check"}, []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit"}, false},
		{"MERGE_DOMAIN_CONFIG merges them", []string{"check"}, []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "MERGE_DOMAIN_CONFIG=true"}, true},
		{"envoyproxy's flags", []string{"check", "-config_dir", dir, "-merge_domain_configs"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binPath, tt.args...)
			cmd.Env = append(cmd.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			if tt.ok {
				if err != nil || !strings.Contains(string(out), dir+": OK, 1 domain(s), 2 rule(s): shared (2)") {
					t.Fatalf("err %v, output:\n%s", err, out)
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), filepath.Join(dir, "b.yaml")+":1: domain: duplicate domain") {
				t.Fatalf("err %v, want exit code 1 and the duplicate domain; output:\n%s", err, out)
			}
		})
	}
}

// FORCE_START_WITHOUT_INITIAL_CONFIG also covers a config directory that
// does not exist yet (a ConfigMap mounted late, a runtime tree not synced
// yet): the service serves UNAVAILABLE until the directory appears with a
// valid file, with either watch setting.
func TestForceStartWithoutConfigDirectory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		watchRoot string
		// missing is the directory under the root that does not exist at
		// start; the watched path must be its parent.
		missing string
	}{
		{"the config directory itself is watched (Kubernetes)", "false", "config"},
		{"the runtime root is watched", "true", "ratelimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.missing == "config" {
				if err := os.Mkdir(filepath.Join(root, "ratelimit"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			svc := spawnService(t, root, "FORCE_START_WITHOUT_INITIAL_CONFIG=true", "BACKEND_TYPE=memory", "RUNTIME_WATCH_ROOT="+tt.watchRoot)
			testkit.WaitFor(t, 15*time.Second, "the HTTP port to answer", func() bool { return httpStatus(t, "http://"+svc.httpAddr+"/healthcheck") != 0 })
			if code := httpStatus(t, "http://"+svc.httpAddr+"/healthcheck"); code != http.StatusInternalServerError {
				t.Fatalf("healthcheck without a config directory: %d, want 500", code)
			}
			if _, err := svc.call(request("it", desc("generic_key", "fixed"))); status.Code(err) != codes.Unavailable {
				t.Fatalf("call without a config directory: %v, want Unavailable", err)
			}
			if err := os.MkdirAll(svc.configDir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(svc.configDir, "it.yaml"), itConfig)
			svc.waitHealthy(10 * time.Second)
			if resp, err := svc.call(request("it", desc("generic_key", "fixed"))); err != nil || resp.GetOverallCode() != ok {
				t.Fatalf("call once the directory exists: %v %v", resp, err)
			}
		})
	}
}
