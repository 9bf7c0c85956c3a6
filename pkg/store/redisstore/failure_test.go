package redisstore_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestRedisDown kills Redis under a working store: every Take must fail
// with an error (Envoy's failure_mode_deny decides, not us), bounded by the
// caller's deadline or, without one, REDIS_TIMEOUT, and the store must
// recover by itself, script cache and all, once Redis is back. The bounds
// are hang guards (testkit.Slack past them), REDIS_TIMEOUT far enough from
// the deadlines that the guard tells which one ended the call.
func TestRedisDown(t *testing.T) {
	const redisTimeout = 3 * time.Second
	srv := redistest.StartProcess(t)
	clock := storetest.NewClock(storetest.Epoch())
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithTimeout(redisTimeout))
	mustTake(t, s, batch(3, window(5), 1))

	srv.Stop()
	cases := []struct {
		name     string
		deadline time.Duration
		within   time.Duration
	}{
		// Envoy's default deadline, and a longer one.
		{name: "20ms deadline", deadline: 20 * time.Millisecond, within: 20*time.Millisecond + testkit.Slack},
		{name: "100ms deadline", deadline: 100 * time.Millisecond, within: 100*time.Millisecond + testkit.Slack},
		// No caller deadline: REDIS_TIMEOUT is the bound.
		{name: "no deadline", deadline: 0, within: redisTimeout + testkit.Slack},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Repeat: the first call meets a pooled connection to the dead
			// server, later ones meet dial errors; both must be fast.
			for i := range 3 {
				ctx, cancel := context.WithCancel(t.Context())
				if tc.deadline > 0 {
					ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
				}
				start := time.Now()
				res, err := s.Take(ctx, batch(3, window(5), 1))
				took := time.Since(start)
				cancel()
				if err == nil || res != nil {
					t.Fatalf("call %d: Take with Redis down = %v, %v; want an error and no results", i, res, err)
				}
				if took > tc.within {
					t.Errorf("call %d: Take with Redis down took %s, want under %s (err: %v)", i, took, tc.within, err)
				}
				t.Logf("call %d: failed in %s: %v", i, took, err)
			}
		})
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping succeeded with Redis down")
	}

	// The restarted server is empty: no keys and no cached script, so the
	// runner must fall back from NOSCRIPT to EVAL on its own.
	srv.Restart(t)
	// go-redis redials in the background about once a second after every
	// connection has failed.
	var res store.Result
	testkit.WaitForNil(t, 10*time.Second, "the store to recover", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		got, err := s.Take(ctx, batch(1, window(5), 1))
		if err == nil {
			res = got[0]
		}
		return err
	})
	if !res.Allowed || res.Remaining != 4 {
		t.Errorf("first Take after restart: %+v, want allowed with remaining 4 (fresh state)", res.Decision)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after restart: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(redisstore.WithAddr(srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	mustTake(t, s, batch(1, window(5), 1))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Take(t.Context(), batch(1, window(5), 1)); err == nil {
		t.Fatal("Take after Close succeeded")
	}
}

// TestRedisHung points the store at a server that accepts connections and
// never answers (a stopped or partitioned Redis, envoyproxy/ratelimit#462):
// the caller's deadline, or REDIS_TIMEOUT without one, must bound each Take.
// The bounds are hang guards (testkit.Slack past them); each case's other
// bound is far beyond, so the guard tells which one ended the call.
func TestRedisHung(t *testing.T) {
	const short, long = 300 * time.Millisecond, 10 * time.Second
	addr := hungServer(t)
	cases := []struct {
		name         string
		redisTimeout time.Duration
		deadline     time.Duration
		within       time.Duration
	}{
		{name: "20ms deadline", redisTimeout: long, deadline: 20 * time.Millisecond, within: 20*time.Millisecond + testkit.Slack},
		{name: "100ms deadline", redisTimeout: long, deadline: 100 * time.Millisecond, within: 100*time.Millisecond + testkit.Slack},
		{name: "deadline beyond REDIS_TIMEOUT", redisTimeout: short, deadline: long, within: short + testkit.Slack},
		{name: "no deadline", redisTimeout: short, deadline: 0, within: short + testkit.Slack},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, redisstore.WithAddr(addr), redisstore.WithTimeout(tc.redisTimeout))
			ctx, cancel := context.WithCancel(t.Context())
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
			}
			start := time.Now()
			res, err := s.Take(ctx, batch(2, window(5), 1))
			took := time.Since(start)
			cancel()
			if err == nil || res != nil {
				t.Fatalf("Take against a hung server = %v, %v; want an error", res, err)
			}
			if took > tc.within {
				t.Errorf("Take against a hung server took %s, want under %s", took, tc.within)
			}
		})
	}
	s := newStore(t, redisstore.WithAddr(addr), redisstore.WithTimeout(short))
	start := time.Now()
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping succeeded against a hung server")
	} else if took := time.Since(start); took > short+testkit.Slack {
		t.Errorf("Ping against a hung server took %s", took)
	}
}

// hungServer is the address of a server that accepts connections and holds
// them open, never reading or answering, until t ends.
func hungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
