package redisconn

import (
	"net"
	"time"
)

// failedConn stands for a dial that failed. go-redis's pool counts dial
// errors and, once PoolSize of them have accumulated (they are never reset
// while the node is up), refuses to dial and retries in the background once
// a second: a restarted Redis would wait up to a second for its first call.
// The breaker takes over that job, so the pool gets this connection instead
// of the error, and its first write fails with the dial's error: the call
// sees exactly what the dial said, and the pool discards the connection.
type failedConn struct{ err error }

// dialFailed carries the dial error through go-redis, which unwraps a
// connection-setup error once before returning it.
type dialFailed struct{ err error }

func (e dialFailed) Error() string { return e.err.Error() }
func (e dialFailed) Unwrap() error { return e.err }

func (c failedConn) Read([]byte) (int, error)       { return 0, dialFailed(c) }
func (c failedConn) Write([]byte) (int, error)      { return 0, dialFailed(c) }
func (failedConn) Close() error                     { return nil }
func (failedConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (failedConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (failedConn) SetDeadline(time.Time) error      { return nil }
func (failedConn) SetReadDeadline(time.Time) error  { return nil }
func (failedConn) SetWriteDeadline(time.Time) error { return nil }
