// Package redistest gives tests a real, private Redis: a testcontainers
// container where a Docker engine answers, otherwise a redis-server process
// from PATH on 127.0.0.1. Under CI=true a missing Redis fails the test; on a
// developer machine without Redis it skips.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/ratelimitd/ratelimitd/internal/redisproc"
)

// Server is one running Redis.
type Server struct {
	Addr string

	mu   sync.Mutex
	port int
	args []string
	// tlsOnly: the port is --tls-port and the plain port is off.
	tlsOnly bool
	dir     string
	// container: a testcontainers container, which Restart cannot bring
	// back on its address.
	container bool
	proc      *redisproc.Process
	stop      func()
	// dial opens a connection for the readiness probe; nil is plain TCP.
	dial func() (net.Conn, error)
}

// Start returns a fresh Redis for t, torn down when the test ends: a
// container where a Docker engine answers, else a redis-server process.
// Extra redis-server arguments (e.g. "--requirepass", "x") ask for the
// process mode.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	if len(args) == 0 && dockerAvailable() {
		if s, err := startContainer(); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	return StartProcess(t, args...)
}

// StartProcess is Start as a redis-server process from PATH, whatever
// Docker offers: the mode Restart needs, since a container does not come
// back on the host port it had.
func StartProcess(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server not on PATH and no Docker engine")
	}
	s := &Server{args: args, dir: t.TempDir()}
	if err := s.spawn(bin); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Missing skips t, or fails it under CI=true where Redis must be present.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("redistest: %s (CI=true: a missing Redis is a failure)", why)
	}
	t.Skipf("redistest: %s", why)
}

// spawn starts redis-server on s.port, or on a free port it sets s.port
// and s.Addr to when s.port is 0, and waits until it answers.
func (s *Server) spawn(bin string) error {
	proc, port, err := redisproc.Launch(bin, s.port, func(port int) []string {
		listen := []string{"--port", strconv.Itoa(port)}
		if s.tlsOnly {
			listen = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
		}
		argv := append(listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir)
		return append(argv, s.args...)
	})
	if err != nil {
		return err
	}
	s.proc, s.port = proc, port
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dial := s.dial
	if dial == nil {
		dial = func() (net.Conn, error) { return net.DialTimeout("tcp", s.Addr, 200*time.Millisecond) }
	}
	return waitReady(s.Addr, 10*time.Second, dial)
}

// Stop kills the server; Restart brings it back on the same address, empty.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Restart starts a stopped process-mode server again on the same port (which
// another test could take meanwhile, a risk the port choice keeps small: see
// internal/redisproc).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.container {
		t.Fatalf("redistest: Restart needs a server from StartProcess, not a container")
	}
	s.Stop()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.spawn(bin); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// Freeze stops a process-mode server with SIGSTOP, as a Redis that has
// stalled (a long command, a swap storm): connections stay open and nothing
// is answered until thaw (SIGCONT), which also runs at cleanup.
func (s *Server) Freeze(t testing.TB) (thaw func()) {
	t.Helper()
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		t.Fatalf("redistest: Freeze needs a running server from StartProcess")
	}
	if err := proc.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("redistest: freeze: %v", err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := proc.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("redistest: thaw: %v", err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// waitReady polls until a PING through dial is answered.
func waitReady(addr string, within time.Duration, dial func() (net.Conn, error)) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := dial()
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Close()
			// A password-protected server answers NOAUTH, which also means ready.
			if reply := string(buf[:n]); strings.HasPrefix(reply, "+PONG") || strings.Contains(reply, "NOAUTH") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis at %s not ready after %s", addr, within)
}

func dockerAvailable() bool {
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(ctx) == nil
}

func startContainer() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcredis.Run(ctx, "redis:7-alpine")
	if err != nil {
		return nil, err
	}
	uri, err := c.ConnectionString(ctx)
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, err
	}
	return &Server{
		Addr:      strings.TrimPrefix(uri, "redis://"),
		container: true,
		stop:      func() { _ = c.Terminate(context.Background()) },
	}, nil
}
