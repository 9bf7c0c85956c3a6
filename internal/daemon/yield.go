package daemon

import (
	"net"
	"runtime"
)

// yieldEvery is how many bytes a gRPC connection's reader may take in
// before it lets other goroutines run.
const yieldEvery = 256 << 10

// yieldingListener makes each connection's reads yield the processor every
// yieldEvery bytes, so that a client streaming megabytes cannot hold one
// while other callers' small requests wait (TestAdversarialMessagesStayBounded
// measures it). The cost: gRPC sets TCP_USER_TIMEOUT only on a bare
// *net.TCPConn, so these sockets keep the kernel's; keepalive still applies.
type yieldingListener struct{ net.Listener }

func (l yieldingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &yieldingConn{Conn: c}, nil
}

type yieldingConn struct {
	net.Conn
	read int // bytes since the last yield; only the connection's reader touches it
}

func (c *yieldingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.read += n; c.read >= yieldEvery {
		c.read = 0
		runtime.Gosched()
	}
	return n, err
}
