package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// The binaries the tests run: built once by TestMain, unless make test has
// built them ($RATELIMITD_BIN, $RATELIMITD_TOOLS).
var (
	binPath       string
	loadPath      string
	queueLoadPath string
	grpcurlPath   string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv("RATELIMITD_BOMB_ADDR") != "" {
		return m.Run() // a TestBombSender child: it needs no binary
	}
	dir, err := os.MkdirTemp("", "ratelimitd-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binPath, err = testkit.Ratelimitd(dir, "../.."); err != nil {
		fmt.Fprintf(os.Stderr, "ratelimitd: %v\n", err)
		return 1
	}
	// The load drivers run without the race detector: an instrumented
	// client would measure itself, not the service.
	for _, tool := range []struct {
		path *string
		pkg  string
	}{{&loadPath, "../../cmd/rlload"}, {&queueLoadPath, "../../internal/queueload/cmd/queueload"}} {
		if *tool.path, err = testkit.Tool(dir, tool.pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// The grpcurl that go.mod's tool directive pins (the one `go tool
	// grpcurl` runs); without it the grpcurl tests fail under CI=true and
	// skip elsewhere.
	if grpcurlPath, err = testkit.Tool(dir, "github.com/fullstorydev/grpcurl/cmd/grpcurl"); err != nil {
		fmt.Fprintf(os.Stderr, "grpcurl (go.mod's tool directive): %v\n", err)
	}
	return m.Run()
}

// service is one running ratelimitd process.
type service struct {
	t         *testing.T
	cmd       *exec.Cmd
	grpcAddr  string
	httpAddr  string
	debugAddr string
	promAddr  string
	configDir string
	// exited is closed once the process has ended.
	exited <-chan struct{}
	logs   *testkit.SyncBuffer
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
}

// newConfigRoot lays out a runtime directory the envoyproxy way:
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml. It returns the root and
// the config directory.
func newConfigRoot(t *testing.T, files map[string]string) (root, configDir string) {
	t.Helper()
	root = t.TempDir()
	configDir = filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		writeFile(t, filepath.Join(configDir, name), body)
	}
	return root, configDir
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Rename so the watcher never reads a half-written file.
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startService runs the binary with envoyproxy-style settings pointing at
// root; extra env entries ("K=V") are appended last so they win.
func startService(t *testing.T, root string, env ...string) *service {
	t.Helper()
	s := spawnService(t, root, env...)
	s.waitHealthy(15 * time.Second)
	return s
}

// spawnService starts the process and connects a client without waiting
// for it to become healthy.
func spawnService(t *testing.T, root string, env ...string) *service {
	t.Helper()
	return spawnServiceArgs(t, root, nil, env...)
}

// spawnServiceArgs is spawnService with command-line arguments. Every
// listener asks for port 0 and the addresses come back through
// --ready-file: a port chosen here and handed over could be taken by
// another process in between.
func spawnServiceArgs(t *testing.T, root string, args []string, env ...string) *service {
	t.Helper()
	s := &service{t: t, logs: &testkit.SyncBuffer{}, configDir: filepath.Join(root, "ratelimit", "config")}
	ready := filepath.Join(t.TempDir(), "ready.json")
	s.cmd = exec.Command(binPath, append([]string{"--ready-file", ready}, args...)...)
	s.cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		"HOST=127.0.0.1", "PORT=0",
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"LOG_LEVEL=debug",
		// No statsd agent runs beside the tests (envoyproxy's default is
		// on); a test that wants statsd sets USE_STATSD itself.
		"USE_STATSD=false",
	)
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start ratelimitd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	s.exited = exited
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("ratelimitd logs:\n%s", s.logs.String())
		}
	})
	s.readReady(ready, 15*time.Second)
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	s.conn = conn
	s.client = rlsv3.NewRateLimitServiceClient(conn)
	return s
}

// readReady waits for the ready file ratelimitd writes once every listener
// is bound, and takes the addresses from it.
func (s *service) readReady(path string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		body, err := os.ReadFile(path)
		if err == nil {
			var addrs struct{ GRPC, HTTP, Debug, Prometheus string }
			if err := json.Unmarshal(body, &addrs); err != nil {
				s.t.Fatalf("ready file %q: %v", body, err)
			}
			s.grpcAddr, s.httpAddr, s.debugAddr, s.promAddr = addrs.GRPC, addrs.HTTP, addrs.Debug, addrs.Prometheus
			return
		}
		select {
		case <-s.exited:
			s.t.Fatalf("ratelimitd exited before listening; logs:\n%s", s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ratelimitd wrote no ready file within %s; logs:\n%s", within, s.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *service) waitHealthy(within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + s.httpAddr + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.exited:
			s.t.Fatalf("ratelimitd exited; logs:\n%s", s.logs.String())
		default:
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.t.Fatalf("ratelimitd not healthy after %s; logs:\n%s", within, s.logs.String())
}

func (s *service) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *service) signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// call sends one request with a deadline like Envoy's (generous for -race).
func (s *service) call(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.client.ShouldRateLimit(ctx, req)
}
