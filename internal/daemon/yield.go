package daemon

import (
	"net"
	"runtime"
)

// yieldEvery is how many bytes a gRPC connection's reader may take in
// before it lets other goroutines run.
const yieldEvery = 256 << 10

// yieldingListener makes each connection's reads yield the processor every
// yieldEvery bytes. A client streaming megabytes (a 4 MiB message, legal or
// not, must be read whole before any codec sees it) otherwise keeps its
// reader goroutine running back to back, up to the scheduler's 10 ms slice,
// while other connections' small calls wait for a processor; a legitimate
// caller's request is a few hundred bytes and never reaches the threshold.
// (Measured in TestAdversarialMessagesStayBounded: valid calls' p99 under
// 16 senders of 4 MiB messages fell from 20-30 ms to 13-18 ms.) The cost:
// gRPC sets TCP_USER_TIMEOUT only on a bare *net.TCPConn, so the server's
// sockets keep the kernel's default; keepalive still finds dead peers.
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
