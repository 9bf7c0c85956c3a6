package redisproc

import (
	"io"
	"net"
	"os"
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

// A port another process holds makes redis-server exit; Launch takes the
// next candidate instead of failing or reaching the other process.
func TestLaunchSkipsATakenPort(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not on PATH (CI=true: a missing Redis is a failure)")
		}
		t.Skip("redis-server not on PATH")
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

	proc, port, err := Launch(bin, 0, func(port int) []string {
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	})
	if err != nil {
		t.Fatalf("Launch with its first candidate taken: %v", err)
	}
	defer proc.Kill()
	if port == taken {
		t.Fatalf("redis-server reported on the taken port %d", taken)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply := make([]byte, 7)
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, reply); err != nil || string(reply) != "+PONG\r\n" {
		t.Errorf("PING on port %d: %q %v", port, reply, err)
	}
}
