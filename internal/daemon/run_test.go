package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

func TestRunFailsClearly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
		// once: each is said exactly once, however many layers wrapped it.
		once []string
	}{
		{"bad environment", nil, map[string]string{"PORT": "x"}, `PORT="x"`, nil},
		{"missing config directory", []string{"--config", missing}, nil, missing, []string{missing, "config:"}},
		{"port in use", nil, nil, "listener", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, env := tt.args, tt.env
			if tt.name == "port in use" {
				a, _, _, _ := startApp(t, nil)
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(appConfig), 0o644); err != nil {
					t.Fatal(err)
				}
				args = []string{"--config", dir, "--grpc-addr", a.grpcLn.Addr().String(), "--http-addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0"}
			}
			var stderr bytes.Buffer
			err := Run(context.Background(), "test", args, envOf(env), &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run error = %v, want one mentioning %q", err, tt.want)
			}
			for _, w := range tt.once {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Errorf("run error %q says %q %d times, want once", err, w, n)
				}
			}
		})
	}
}

func TestRunStopsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(appConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0"}
	env := map[string]string{"LOG_FORMAT": "json", "USE_STATSD": "false", "GRPC_UDS": "/tmp/x.sock"}
	var stderr testkit.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), "test", args, envOf(env), &stderr) }()
	// The signal handlers are installed before the listening line is logged.
	testkit.WaitFor(t, 5*time.Second, "the listening line", func() bool { return strings.Contains(stderr.String(), "ratelimitd listening") })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	logs := stderr.String()
	if n := strings.Count(logs, "ratelimitd listening"); n != 1 {
		t.Errorf("listening line logged %d times, want once:\n%s", n, logs)
	}
	for _, want := range []string{`"grpc":"127.0.0.1:`, `"backend":"memory"`, "GRPC_UDS=/tmp/x.sock"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	// Default LOG_LEVEL is WARN: info lines other than the announcement stay out.
	if strings.Contains(logs, "shutting down") {
		t.Errorf("info line logged at the default WARN level:\n%s", logs)
	}
}

// TestNewAppReleasesWhatAFailedStepBuilt: a step that fails after the store
// was built (here the gRPC server's TLS files are missing) leaves no store
// running behind the error: the embedded store's sweeper is gone.
func TestNewAppReleasesWhatAFailedStepBuilt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(appConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	set, err := parseSettings([]string{"--config", dir}, envOf(map[string]string{
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": missing, "GRPC_SERVER_TLS_KEY": missing,
	}))
	if err != nil {
		t.Fatal(err)
	}
	before := memstoreSweepers()
	if _, err := newApp(set, zap.NewNop()); err == nil {
		t.Fatal("newApp with missing TLS files succeeded")
	}
	testkit.WaitFor(t, 2*time.Second, "the failed app's store to stop sweeping", func() bool {
		return memstoreSweepers() <= before
	})
}

// memstoreSweepers counts the goroutines memstore.New started.
func memstoreSweepers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "\ncreated by github.com/ratelimitd/ratelimitd/pkg/store/memstore.New ")
}
