package redisstore

import (
	"errors"
	"net"
	"testing"
	"time"
)

// A call refused by an open breaker (pkg/redisconn) is shed: the node
// is down, so the store neither retries it nor waits for its deadline.
func TestBreakerRefusalIsShed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: every dial is refused
	s := defaults()
	for _, o := range []Option{WithAddr(addr), WithTimeout(time.Second), WithBreaker(1, time.Hour)} {
		o(&s)
	}
	c, stop, err := s.conn.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		_ = c.Close()
	})
	if err := c.Ping(t.Context()).Err(); err == nil || errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("first call: %v, want the dial error", err)
	}
	err = c.Ping(t.Context()).Err()
	if !errors.Is(err, ErrBreakerOpen) || classify(err) != shed || Retryable(err) {
		t.Errorf("call while open: %v (classified %d), want ErrBreakerOpen, shed, not retryable", err, classify(err))
	}
}
