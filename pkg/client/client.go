// Package client calls ratelimitd from a Go program: a typed client for
// ShouldRateLimit, the counters API and the delay queue over one gRPC
// connection (Client), Envoy-style descriptors built from an *http.Request or
// a gRPC call (Action, RateLimit, Builder), and a Limiter that decides with a
// deadline and a client-side answer for when the service cannot decide
// (OnError).
//
// A Limiter decides against a Backend: a Client (Remote: ratelimitd over
// gRPC) or a *service.Service (Embedded: the same service in this process,
// on memstore or redisstore). Both answer the same for the same rules, so a
// program switches between them by configuration. pkg/middleware puts a
// Limiter in front of net/http handlers and gRPC servers.
package client

import (
	"context"
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	adminv1 "github.com/ratelimitd/ratelimitd/api/admin/v1"
	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuegrpc"
)

// Backend decides rate-limit requests: a *Client (Remote) or a
// *service.Service (Embedded). Errors carry a gRPC status, as
// service.Service's do.
type Backend interface {
	ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

var _ Backend = (*Client)(nil)

// Client is ratelimitd's gRPC API on one connection, shared by every call:
// the RateLimitService, the counters API (Counters) and the delay queue
// (Queue). It is safe for concurrent use.
type Client struct {
	conn     grpc.ClientConnInterface
	closer   func() error
	rls      rlsv3.RateLimitServiceClient
	counters *Counters
	queue    *queuegrpc.Client
}

// Dial connects to ratelimitd's gRPC port at target (a grpc.NewClient
// target: "host:port", "dns:///ratelimitd:8081", "unix:///run/rl.sock").
// The connection is made on first use and kept; Close releases it. Without
// WithTLS it is plaintext, as ratelimitd serves by default.
func Dial(target string, opts ...Option) (*Client, error) {
	o := newOptions(opts)
	conn, err := grpc.NewClient(target, o.dialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", target, err)
	}
	c := New(conn, opts...)
	c.closer = conn.Close
	return c, nil
}

// New uses conn, which the caller keeps and closes: several clients, or a
// program's own stubs, may share it. Dial options in opts are ignored.
func New(conn grpc.ClientConnInterface, opts ...Option) *Client {
	o := newOptions(opts)
	return &Client{
		conn:     conn,
		closer:   func() error { return nil },
		rls:      rlsv3.NewRateLimitServiceClient(conn),
		counters: &Counters{c: adminv1.NewCountersClient(conn), token: o.adminToken},
		queue:    queuegrpc.NewClient(queuev1.NewDelayQueueClient(conn)),
	}
}

// Conn is the client's connection, for the program's own stubs of other
// ratelimitd services (or of anything on the same target).
func (c *Client) Conn() grpc.ClientConnInterface { return c.conn }

// Close closes the connection Dial made; it does nothing for New's.
func (c *Client) Close() error { return c.closer() }

// ShouldRateLimit implements Backend: one call of
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, within ctx's
// deadline.
func (c *Client) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return c.rls.ShouldRateLimit(ctx, req)
}

// Counters is the counters API (docs/counters.md), presenting the token of
// WithAdminToken.
func (c *Client) Counters() *Counters { return c.counters }

// Queue is the delay queue (docs/queue.md): pkg/queue/queuegrpc's client
// on this connection.
func (c *Client) Queue() *queuegrpc.Client { return c.queue }
