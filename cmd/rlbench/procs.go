package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redisproc"
)

// child is a process rlbench started and stops at the end.
type child struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has ended.
	exited chan struct{}
}

// newChild watches cmd, which has started, until it exits.
func newChild(name string, cmd *exec.Cmd) *child {
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// startRedis runs redis-server on a port internal/redisproc chooses (one
// below the kernel's ephemeral range, another if it is taken), with extra
// arguments after the bench's own.
func startRedis(bin, dir string, extra ...string) (*child, string, error) {
	proc, port, err := redisproc.Launch(bin, 0, func(port int) []string {
		return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	})
	if err != nil {
		return nil, "", err
	}
	return &child{name: "redis-server", cmd: proc.Cmd, exited: proc.Exited}, "127.0.0.1:" + strconv.Itoa(port), nil
}

// serviceAddrs are what ratelimitd's --ready-file says it listens on.
type serviceAddrs struct{ GRPC, HTTP, Debug string }

// startService runs the ratelimitd binary on port 0 everywhere, with env
// added to rlbench's own environment (so REDIS_PIPELINE_WINDOW=... make
// bench reaches it); it learns the ports from --ready-file and waits for
// /healthcheck.
func startService(bin, config string, logTo io.Writer, env ...string) (*child, serviceAddrs, error) {
	dir, err := os.MkdirTemp("", "rlbench-ready-")
	if err != nil {
		return nil, serviceAddrs{}, err
	}
	defer os.RemoveAll(dir)
	ready := filepath.Join(dir, "ready.json")
	cmd := exec.Command(bin, "--config", config, "--ready-file", ready)
	// USE_STATSD=false unless a target says otherwise: envoyproxy's
	// default is on, and the figures compare decisions without a statsd
	// agent (redis+USE_STATSD=true measures one).
	cmd.Env = append(os.Environ(),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "HOST=127.0.0.1", "PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"LOG_LEVEL=error", "USE_STATSD=false")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logTo, logTo
	if err := cmd.Start(); err != nil {
		return nil, serviceAddrs{}, fmt.Errorf("start %s: %w", bin, err)
	}
	c := newChild("ratelimitd", cmd)
	var addrs serviceAddrs
	deadline := time.Now().Add(20 * time.Second)
	for {
		if addrs.HTTP == "" {
			if b, err := os.ReadFile(ready); err == nil {
				_ = json.Unmarshal(b, &addrs)
			}
		}
		if addrs.HTTP != "" {
			if resp, err := http.Get("http://" + addrs.HTTP + "/healthcheck"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return c, addrs, nil
				}
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, serviceAddrs{}, fmt.Errorf("ratelimitd (%v) not healthy within 20 s", env)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startFloor re-executes rlbench as the bare gRPC server.
func startFloor() (*child, string, error) {
	return startSelf("floor", "-serve-floor", "127.0.0.1:0")
}

// startSelf re-executes rlbench with args, as a server that prints its
// address on its first line.
func startSelf(name string, args ...string) (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	// The first line is read before anything waits on the process: Wait
	// would close the pipe under the read.
	line, err := bufio.NewReader(out).ReadString('\n')
	c := newChild(name, cmd)
	if err != nil {
		c.stop()
		return nil, "", fmt.Errorf("%s server: %w", name, err)
	}
	return c, strings.TrimSpace(line), nil
}

// startModel re-executes rlbench as envoy-model on redisAddr.
func startModel(redisAddr string, unit time.Duration, limit uint64) (*child, string, error) {
	return startSelf("envoy-model", "-serve-model", "127.0.0.1:0", "-model-redis", redisAddr,
		"-model-unit", unit.String(), "-model-limit", strconv.FormatUint(limit, 10))
}

// workDir makes a temporary directory for a run (Redis's files) and the
// services' log in it; cleanup removes both.
func workDir(prefix string) (dir string, logFile *os.File, cleanup func(), err error) {
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, nil, err
	}
	if logFile, err = os.Create(filepath.Join(dir, "ratelimitd.log")); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, nil, err
	}
	return dir, logFile, func() { _ = logFile.Close(); _ = os.RemoveAll(dir) }, nil
}
