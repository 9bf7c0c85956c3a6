package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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

// startRedis runs redis-server on a port below the kernel's ephemeral
// range (redis-server cannot bind port 0 and say which port it got; a port
// from that range can be taken by any outgoing connection), trying another
// when the chosen one is taken.
func startRedis(bin, dir string) (*child, string, error) {
	var lastErr error
	for range 20 {
		port := redisPort()
		c, addr, err := startRedisOn(bin, dir, port)
		if err == nil {
			return c, addr, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, "", lastErr
}

var errPortTaken = errors.New("port taken")

func startRedisOn(bin, dir string, port int) (*child, string, error) {
	var out strings.Builder
	var mu sync.Mutex
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", bin, err)
	}
	c := newChild("redis-server", cmd)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-c.exited:
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(out.String(), "Address already in use") {
				return nil, "", fmt.Errorf("redis-server on %s: %w", addr, errPortTaken)
			}
			return nil, "", fmt.Errorf("redis-server on %s exited: %s", addr, out.String())
		default:
		}
		// Once it has bound its port (it logs "Running mode=" then), the
		// PING reaches this process, not one that held the port before.
		mu.Lock()
		bound := strings.Contains(out.String(), "Running mode=")
		mu.Unlock()
		if bound {
			if r, err := dialRedis(addr); err == nil {
				_, err = r.do("PING")
				r.close()
				if err == nil {
					return c, addr, nil
				}
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, "", fmt.Errorf("redis-server on %s not ready", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// redisPort picks a port in [10000, min(20000, ephemeral low - 10000)),
// clear of the ephemeral range and of the bus ports (+10000) of the Redis
// Cluster nodes the tests start in the same range (internal/redistest).
func redisPort() int {
	lo, hi := 10000, 20000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var eLo, eHi int
		if _, err := fmt.Sscan(string(b), &eLo, &eHi); err == nil && eLo-10000 > lo+100 {
			hi = min(20000, eLo-10000)
		}
	}
	return lo + rand.IntN(hi-lo)
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
