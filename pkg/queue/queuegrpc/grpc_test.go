package queuegrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/memqueue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuegrpc"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuetest"
	"github.com/ratelimitd/ratelimitd/pkg/queue/redisqueue"
)

// serve runs st behind a real gRPC server on loopback and returns a client.
func serve(t *testing.T, st queue.Store) queuev1.DelayQueueClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	queuev1.RegisterDelayQueueServer(srv, queuegrpc.New(queue.NewBroker(st)))
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		_ = st.Close()
	})
	return queuev1.NewDelayQueueClient(conn)
}

func TestConformanceMemory(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, clock *queuetest.Clock) queue.Queue {
		return queuegrpc.NewClient(serve(t, clock.Watch(memqueue.New(memqueue.WithClock(clock.Now)), false)))
	})
}

func TestConformanceRedis(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	queuetest.Run(t, func(t *testing.T, clock *queuetest.Clock) queue.Queue {
		if err := admin.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		st, err := redisqueue.New(redis.NewClient(&redis.Options{Addr: srv.Addr}), redisqueue.WithOwnedClient(), redisqueue.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		return queuegrpc.NewClient(serve(t, clock.Watch(st, true)))
	})
}

// TestProtoOnlyInput covers what only the wire can express: invalid
// Duration and Timestamp messages, max_messages beyond int range, both
// delay and deliver_at set to zero values.
func TestProtoOnlyInput(t *testing.T) {
	c := serve(t, memqueue.New())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cases := map[string]func() error{
		"invalid duration": func() error {
			_, err := c.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "q", Delay: &durationpb.Duration{Seconds: 1, Nanos: -5}})
			return err
		},
		"invalid timestamp": func() error {
			_, err := c.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "q", DeliverAt: &timestamppb.Timestamp{Seconds: -1 << 62}})
			return err
		},
		"zero delay and deliver_at both set": func() error {
			_, err := c.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "q", Delay: &durationpb.Duration{}, DeliverAt: timestamppb.Now()})
			return err
		},
		"max_messages 2^32-1": func() error {
			_, err := c.Claim(ctx, &queuev1.ClaimRequest{Queue: "q", MaxMessages: 1<<32 - 1})
			return err
		},
		"negative wait": func() error {
			_, err := c.Claim(ctx, &queuev1.ClaimRequest{Queue: "q", MaxMessages: 1, Wait: durationpb.New(-time.Second)})
			return err
		},
	}
	for name, call := range cases {
		if code := status.Code(call()); code != codes.InvalidArgument {
			t.Errorf("%s: %s, want InvalidArgument", name, code)
		}
	}
	res, err := c.Claim(ctx, &queuev1.ClaimRequest{Queue: "q", MaxMessages: 10})
	if err != nil || len(res.GetMessages()) != 0 {
		t.Fatalf("rejected enqueues added messages: %v, %v", res, err)
	}
}

// TestUnavailable: a dead Redis is UNAVAILABLE, not a hang or an empty OK.
func TestUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisqueue.New(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1}), redisqueue.WithOwnedClient(), redisqueue.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, st)
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = c.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "q"})
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("enqueue on a dead Redis: %v, want Unavailable", err)
	}
}
