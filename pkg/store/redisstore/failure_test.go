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

// TestRedisDown kills Redis under a working store: every Take must fail fast
// with an error (Envoy's failure_mode_deny decides, not us), and the store
// must recover by itself, script cache and all, once Redis is back.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.Epoch())
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithTimeout(2*time.Second))
	mustTake(t, s, batch(3, window(5), 1))

	srv.Stop()
	cases := []struct {
		name     string
		deadline time.Duration
		within   time.Duration
	}{
		{name: "100ms deadline", deadline: 100 * time.Millisecond, within: time.Second},
		// Envoy's default: the answer must come back by then plus slack.
		{name: "20ms deadline", deadline: 20 * time.Millisecond, within: 20*time.Millisecond + 80*time.Millisecond},
		// No caller deadline: REDIS_TIMEOUT (2 s here) is the bound.
		{name: "no deadline", deadline: 0, within: 2*time.Second + 500*time.Millisecond},
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
func TestRedisHung(t *testing.T) {
	const redisTimeout = 300 * time.Millisecond
	s := newStore(t, redisstore.WithAddr(hungServer(t)), redisstore.WithTimeout(redisTimeout))
	cases := []struct {
		name     string
		deadline time.Duration
		within   time.Duration
	}{
		{name: "20ms deadline", deadline: 20 * time.Millisecond, within: 20*time.Millisecond + 150*time.Millisecond},
		{name: "100ms deadline", deadline: 100 * time.Millisecond, within: 100*time.Millisecond + 150*time.Millisecond},
		{name: "deadline beyond REDIS_TIMEOUT", deadline: 10 * time.Second, within: redisTimeout + 400*time.Millisecond},
		{name: "no deadline", deadline: 0, within: redisTimeout + 400*time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A loaded box (the race detector, parallel packages) can stall
			// a goroutine well past its deadline now and then: one of three
			// attempts must come back in time, and a Take the deadline did
			// not bound fails all three.
			var took time.Duration
			for range 3 {
				ctx, cancel := context.WithCancel(t.Context())
				if tc.deadline > 0 {
					ctx, cancel = context.WithTimeout(t.Context(), tc.deadline)
				}
				start := time.Now()
				res, err := s.Take(ctx, batch(2, window(5), 1))
				took = time.Since(start)
				cancel()
				if err == nil || res != nil {
					t.Fatalf("Take against a hung server = %v, %v; want an error", res, err)
				}
				t.Logf("failed in %s: %v", took, err)
				if took <= tc.within {
					return
				}
			}
			t.Errorf("Take against a hung server took %s, want under %s", took, tc.within)
		})
	}
	start := time.Now()
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping succeeded against a hung server")
	} else if took := time.Since(start); took > redisTimeout+200*time.Millisecond {
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
