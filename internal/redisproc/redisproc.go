// Package redisproc starts redis-server (or Sentinel) processes on ports of
// 127.0.0.1 it chooses: the tests' private servers (internal/redistest) and
// the benchmark's (cmd/rlbench). It imports nothing of the test machinery,
// so a command can use it.
package redisproc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// redis-server cannot listen on port 0 and report the port, so a test must
// name one. A port from the kernel's ephemeral range can be taken at any
// moment by an outgoing connection or a port-0 listener, so ports are
// chosen below that range, and a port another test process took first is
// noticed (redis-server exits with "Address already in use") and replaced.
// Cluster nodes also bind port+10000 (the bus): client ports come from
// [portFloor, busOffset+portFloor) so that no bus port is ever another
// node's client port.
const (
	portFloor = 10000
	busOffset = 10000
	// maxLaunches bounds the attempts at a free port.
	maxLaunches = 30
)

var ports struct {
	once   sync.Once
	lo, hi int // candidates are [lo, hi)
	mu     sync.Mutex
	next   int
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 0 {
			return lo
		}
	}
	return 32768 // Linux's default
}

// nextPort returns the next candidate: a random start per process, then
// consecutive ports, so test processes running at once rarely meet.
func nextPort() int {
	ports.once.Do(func() {
		ports.lo = portFloor
		ports.hi = min(portFloor+busOffset, ephemeralLow()-busOffset)
		if ports.hi-ports.lo < 100 {
			// An unusual ephemeral range: keep clear of the well-known
			// ports and rely on the retry alone.
			ports.lo, ports.hi = 1024, 1024+busOffset
		}
		ports.next = ports.lo + rand.IntN(ports.hi-ports.lo)
	})
	ports.mu.Lock()
	defer ports.mu.Unlock()
	p := ports.next
	ports.next++
	if ports.next >= ports.hi {
		ports.next = ports.lo
	}
	return p
}

// errPortTaken: redis-server could not bind its port.
var errPortTaken = errors.New("port taken")

// Process is one redis-server (or Sentinel) process.
type Process struct {
	Cmd *exec.Cmd
	// Exited is closed once the process has ended.
	Exited chan struct{}
	out    *logBuffer
}

// Launch starts bin with argv(port) on port, or on candidate ports until
// one binds when port is 0, and returns once it listens, with its port.
func Launch(bin string, port int, argv func(port int) []string) (*Process, int, error) {
	for range maxLaunches {
		p := port
		if p == 0 {
			p = nextPort()
		}
		proc, err := startProcess(bin, argv(p))
		if errors.Is(err, errPortTaken) && port == 0 {
			continue
		}
		return proc, p, err
	}
	return nil, 0, fmt.Errorf("no free port after %d attempts", maxLaunches)
}

// startProcess waits for redis-server to say it runs (it logs its mode and
// port once its sockets are bound) or to exit.
func startProcess(bin string, argv []string) (*Process, error) {
	proc := &Process{Cmd: exec.Command(bin, argv...), Exited: make(chan struct{}), out: &logBuffer{}}
	proc.Cmd.Stdout, proc.Cmd.Stderr = proc.out, proc.out
	if err := proc.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = proc.Cmd.Wait(); close(proc.Exited) }()
	deadline := time.After(10 * time.Second)
	for {
		if strings.Contains(proc.out.String(), "Running mode=") {
			return proc, nil
		}
		select {
		case <-proc.Exited:
			if strings.Contains(proc.out.String(), "Address already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("redis-server exited: %s", proc.out.String())
		case <-deadline:
			proc.Kill()
			return nil, fmt.Errorf("redis-server did not start within 10 s: %s", proc.out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Kill ends the process and waits for it.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.Exited
}

// logBuffer collects a process's output while it runs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
