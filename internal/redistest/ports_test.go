package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
)

// Candidates and their Cluster bus ports stay below the ephemeral range,
// and the two ranges do not meet.
func TestPortsStayBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 3 * busOffset {
		p := nextPort()
		if p < ports.lo || p >= ports.hi {
			t.Fatalf("port %d outside [%d, %d)", p, ports.lo, ports.hi)
		}
		if p+busOffset >= low && low-busOffset > portFloor+100 {
			t.Fatalf("bus port %d of %d is in the ephemeral range from %d", p+busOffset, p, low)
		}
		if p+busOffset < ports.hi {
			t.Fatalf("bus port %d of %d is itself a candidate client port", p+busOffset, p)
		}
	}
}

// A port another process holds makes redis-server exit; Start takes the
// next candidate instead of failing or reaching the other process.
func TestStartSkipsATakenPort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		Missing(t, "redis-server not on PATH")
	}
	nextPort() // initialise the range
	var held net.Listener
	for p := ports.lo; held == nil && p < ports.hi; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			held = ln
		}
	}
	if held == nil {
		t.Fatal("no candidate port could be held")
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	ports.mu.Lock()
	ports.next = taken
	ports.mu.Unlock()

	s := &Server{dir: t.TempDir()}
	bin, _ := exec.LookPath("redis-server")
	if err := s.spawn(bin); err != nil {
		t.Fatalf("spawn with its first candidate taken: %v", err)
	}
	defer s.Stop()
	if s.port == taken {
		t.Fatalf("redis-server reported on the taken port %d", taken)
	}
	if out, err := Cli(s.Addr, "ping"); err != nil || out != "PONG\n" {
		t.Errorf("PING %s: %q %v", s.Addr, out, err)
	}
}
