package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuTime is the user+system CPU the process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after ")" are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// child is a process rlbench started and stops at the end.
type child struct {
	name string
	cmd  *exec.Cmd
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startRedis(bin, dir string) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{name: "redis-server", cmd: cmd}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := dialRedis(addr)
		if err == nil {
			_, err = r.do("PING")
			r.close()
			if err == nil {
				return c, addr, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, "", fmt.Errorf("redis-server on %s not ready: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startService runs the ratelimitd binary with env added to rlbench's own
// environment (so REDIS_PIPELINE_WINDOW=... make bench reaches it) and
// waits for /healthcheck.
func startService(bin, config string, logTo io.Writer, env ...string) (*child, string, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		ports[i] = p
	}
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = append(os.Environ(),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[0]),
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[2]),
		"LOG_LEVEL=error")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logTo, logTo
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{name: "ratelimitd", cmd: cmd}
	health := fmt.Sprintf("http://127.0.0.1:%d/healthcheck", ports[1])
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, grpcAddr, nil
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, "", fmt.Errorf("ratelimitd (%v) not healthy at %s", env, health)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startFloor re-executes rlbench as the bare gRPC server.
func startFloor() (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "-serve-floor", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	c := &child{name: "floor", cmd: cmd}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.stop()
		return nil, "", fmt.Errorf("floor server: %w", err)
	}
	return c, strings.TrimSpace(line), nil
}
