package rlqstest

import (
	"context"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
)

// clientStream is one StreamRateLimitQuotas to one server.
type clientStream struct {
	addr   string
	s      grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	cancel context.CancelFunc
}

// startStream opens a stream to the next server in turn, as the filter's
// cluster picks a host; false when that fails (e.mu held).
func (e *Envoy) startStream() bool {
	if e.closed || len(e.set.Addrs) == 0 {
		return false
	}
	addr := e.set.Addrs[e.pick%len(e.set.Addrs)]
	e.pick++
	conn := e.conns[addr]
	if conn == nil {
		c, err := e.dial(addr)
		if err != nil {
			return false
		}
		conn, e.conns[addr] = c, c
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		return false
	}
	cs := &clientStream{addr: addr, s: s, cancel: cancel}
	e.stream = cs
	go e.receive(cs)
	return true
}

// send sends msg on the stream; a failure closes it (e.mu held).
func (e *Envoy) send(msg *rlqsv3.RateLimitQuotaUsageReports) {
	cs := e.stream
	if err := cs.s.Send(msg); err != nil {
		e.drop(cs)
		return
	}
	e.sent[cs.addr]++
}

// receive queues the stream's responses for Tick until it fails.
func (e *Envoy) receive(cs *clientStream) {
	for {
		resp, err := cs.s.Recv()
		e.mu.Lock()
		if err != nil {
			e.drop(cs)
			e.mu.Unlock()
			return
		}
		e.inbox = append(e.inbox, inboxItem{resp: resp, from: cs.addr})
		e.received[cs.addr]++
		e.mu.Unlock()
	}
}

// drop forgets a failed stream; the next report starts another (e.mu
// held).
func (e *Envoy) drop(cs *clientStream) {
	cs.cancel()
	if e.stream == cs {
		e.stream = nil
	}
}

// Counts are the reports e sent to addr and the responses it received
// from it.
func (e *Envoy) Counts(addr string) (sent, received int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent[addr], e.received[addr]
}

// AssignedBy is when a response from addr last assigned one of e's
// buckets (zero: never).
func (e *Envoy) AssignedBy(addr string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.assigned[addr]
}

// Server is the address of e's stream; "" while it is down.
func (e *Envoy) Server() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stream == nil {
		return ""
	}
	return e.stream.addr
}

// Close ends e's stream and connections.
func (e *Envoy) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.stream != nil {
		e.drop(e.stream)
	}
	for _, c := range e.conns {
		_ = c.Close()
	}
}
