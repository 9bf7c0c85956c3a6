package redisqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/queue"
	"github.com/ratelimitd/ratelimitd/pkg/queue/queuetest"
	"github.com/ratelimitd/ratelimitd/pkg/queue/redisqueue"
	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
)

func newStore(t *testing.T, addr string, opts ...redisqueue.Option) *redisqueue.Store {
	t.Helper()
	conn := redisconn.Defaults()
	conn.Addr, conn.Timeout = addr, 2*time.Second
	c, err := conn.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisqueue.New(c, append(opts, redisqueue.WithOwnedClient())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	queuetest.Run(t, func(t *testing.T, clock *queuetest.Clock) queue.Queue {
		if err := admin.FlushAll(t.Context()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
		return queue.NewBroker(clock.Watch(newStore(t, srv.Addr, redisqueue.WithClock(clock.Now)), true))
	})
}

// TestCluster: a queue's keys share one slot, so every script runs on a
// three-master Cluster; notifications cross nodes.
func TestCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	conn := redisconn.Defaults()
	conn.Addr, conn.Type = redistest.Addrs(nodes), redisconn.Cluster
	c, err := conn.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisqueue.New(c, redisqueue.WithOwnedClient())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := queue.NewBroker(st)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"alpha", "beta", "gamma", "delta"} {
		if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: name, ID: "m", Payload: []byte(name), Delay: 100 * time.Millisecond}); err != nil {
			t.Fatalf("%s: enqueue: %v", name, err)
		}
		msgs, err := b.Claim(ctx, queue.ClaimRequest{Queue: name, Max: 1, Wait: 5 * time.Second})
		if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != name {
			t.Fatalf("%s: claim: %+v, %v", name, msgs, err)
		}
		if err := b.Ack(ctx, name, "m", msgs[0].Receipt); err != nil {
			t.Fatalf("%s: ack: %v", name, err)
		}
	}
}

// TestKeysExpire: every key the queue writes carries a TTL.
func TestKeysExpire(t *testing.T) {
	srv := redistest.Start(t)
	st := newStore(t, srv.Addr)
	b := queue.NewBroker(st)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: id, Delay: time.Duration(len(id)) * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: "now"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1}); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %v, %v: want due, inflight and data", keys, err)
	}
	for _, k := range keys {
		ttl, err := admin.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 {
			t.Errorf("%s: TTL %s, %v", k, ttl, err)
		}
	}
}

// TestNotifyAcrossReplicas: a long poll in one replica wakes when another
// replica enqueues, through the pub/sub channel. The enqueue waits for the
// poll to be waiting: one that had not claimed yet would find the message
// without any notification.
func TestNotifyAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	watched := queuetest.Watch(newStore(t, srv.Addr), true)
	a := queue.NewBroker(watched)
	b := queue.NewBroker(newStore(t, srv.Addr))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	type result struct {
		msgs []queue.Message
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		msgs, err := a.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 15 * time.Second})
		ch <- result{msgs, err}
	}()
	testkit.WaitFor(t, 10*time.Second, "the long poll to wait on an empty queue, subscribed", watched.Waiting)
	began := time.Now()
	if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || len(r.msgs) != 1 {
			t.Fatalf("claim: %+v, %v", r.msgs, r.err)
		}
		t.Logf("woken %s after the other replica's enqueue", time.Since(began))
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not wake on the other replica's enqueue")
	}
}

// TestRedisDown: a dead Redis is an error within the store's timeout,
// neither a hang nor an empty answer.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	st := newStore(t, srv.Addr, redisqueue.WithTimeout(500*time.Millisecond))
	b := queue.NewBroker(st)
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := b.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 2 * time.Second})
	if err == nil || errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("claim on a dead Redis: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("took %s", took)
	}
}

// TestRedisRestart: after Redis restarts (empty), the subscription comes
// back and a long poll waiting through the restart still wakes on an
// enqueue from another replica.
func TestRedisRestart(t *testing.T) {
	srv := redistest.StartProcess(t)
	a := queue.NewBroker(newStore(t, srv.Addr))
	b := queue.NewBroker(newStore(t, srv.Addr))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := a.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1}); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	type result struct {
		msgs []queue.Message
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The first claims may still meet the dead connections.
		for ctx.Err() == nil {
			msgs, err := a.Claim(ctx, queue.ClaimRequest{Queue: "q", Max: 1, Wait: 15 * time.Second})
			if err == nil {
				ch <- result{msgs, err}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// Enqueue once the other replica reaches the new server; the waiting
	// claim must be woken by the notification, well before its wait ends.
	var enqueued time.Time
	for ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		if _, err := b.Enqueue(ctx, queue.EnqueueRequest{Queue: "q", ID: "x"}); err == nil {
			enqueued = time.Now()
			break
		}
	}
	select {
	case r := <-ch:
		if len(r.msgs) != 1 {
			t.Fatalf("claim after restart: %+v", r.msgs)
		}
		t.Logf("woken %s after the enqueue", time.Since(enqueued))
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not wake after a Redis restart")
	}
}
