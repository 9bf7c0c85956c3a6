package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// The lender case on a three-master Cluster: a request and its block on
// keys in different slots (one take per slot group, charges from each),
// and a Return of both (one undo per slot); the spread case: denied
// requests over several slot groups, some of which admitted their own ops,
// answer as algorithms.TakeAll; and the modes and refunds (docs/tokens.md's
// "Usage and admissions"), over keys in different slots (a refund is never
// undone). TestConformance runs them on a single node.
func TestLenderConformanceCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	admins := redistest.Clients(t, nodes)
	factory := func(t *testing.T, clock *storetest.Clock) store.Store {
		for _, a := range admins {
			if err := a.FlushAll(t.Context()).Err(); err != nil {
				t.Fatalf("FLUSHALL: %v", err)
			}
		}
		return newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), redisstore.WithClock(clock.Now))
	}
	storetest.RunLender(t, factory)
	storetest.RunSpread(t, factory)
	storetest.RunModes(t, factory)
	storetest.RunExact(t, factory)
	t.Run("refunds_published", func(t *testing.T) {
		testRefundsPublished(t, newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock()))
	})
}

// testRefundsPublished: a refund that gives room back to a spent counter
// is published (on a Cluster, whichever master ran it: every node forwards
// it), one of a counter with room left is not, and WatchRefunds hears the
// former and flushes first.
func testRefundsPublished(t *testing.T, s *redisstore.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	keys, flushed := make(chan string, 8), make(chan struct{}, 8)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchRefunds(ctx, func(ks ...string) {
			for _, k := range ks {
				keys <- k
			}
		}, func() { flushed <- struct{}{} })
	}()
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("never subscribed")
	}
	lim := window(2)
	refund := func(key string) store.Request {
		return store.Request{Key: key, Limit: lim, Hits: 1, Mode: algorithms.NegativeHits}
	}
	// Spent counters in three slots, refunded in one request; one with room
	// left, refunded too.
	spent := []string{"{pa}k", "{pb}k", "{pc}k"}
	for _, k := range spent {
		mustTake(t, s, []store.Request{{Key: k, Limit: lim, Hits: 2}})
	}
	mustTake(t, s, []store.Request{{Key: "{pd}k", Limit: lim, Hits: 1}})
	mustTake(t, s, []store.Request{refund(spent[0]), refund(spent[1]), refund(spent[2]), refund("{pd}k")})
	got := map[string]bool{}
	for len(got) < len(spent) {
		select {
		case k := <-keys:
			got[k] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %v, want %v", got, spent)
		}
	}
	if got["{pd}k"] || len(got) != len(spent) {
		t.Errorf("heard %v, want exactly %v", got, spent)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WatchRefunds ended with %v, want its context's error", err)
	}
}

// Return follows the retry rule of every call: an undo that certainly did
// not run is retried and gives the hits back; one whose outcome is unknown
// (it may have run: an undo is not idempotent) is not retried, fails, and
// leaves the hits charged (under-admission, never over-admission).
func TestReturnFailure(t *testing.T) {
	srv := redistest.Start(t)
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name      string
		err       error
		failures  int64
		wantCalls int64 // undo calls seen by the hook
		wantErr   bool
		wantLeft  uint64
	}{
		{"dial refused twice, then retried", dialRefused, 2, 3, false, 10},
		{"EOF: outcome unknown, not retried", io.EOF, 1, 1, true, 5},
	}
	lim := window(10)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hook := &faultHook{sha: scripts.UndoFunction(), err: tt.err}
			hook.n.Store(tt.failures)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			if err := c.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			c.AddHook(hook)
			s := newStore(t, redisstore.WithClient(c), redisstore.WithTimeout(2*time.Second), fixedClock())
			reqs := []store.Request{{Key: "k", Limit: lim, Hits: 1}, {Key: "k", Limit: lim, Hits: 4, Mode: algorithms.Spare}}
			res, charges, err := s.TakeCharged(t.Context(), reqs)
			if err != nil || !res[0].Allowed || !res[1].Allowed || len(charges) != 1 || charges[0].Applied != 5 {
				t.Fatalf("TakeCharged: %+v, %+v, %v; want both allowed, one charge of 5 hits", res, charges, err)
			}
			if err := s.Return(t.Context(), charges); (err != nil) != tt.wantErr {
				t.Fatalf("Return: %v, want error %v", err, tt.wantErr)
			}
			if got := hook.calls.Load(); got != tt.wantCalls {
				t.Errorf("undo sent %d times, want %d", got, tt.wantCalls)
			}
			if got := mustTake(t, s, []store.Request{{Key: "k", Limit: lim}})[0].Remaining; got != tt.wantLeft {
				t.Errorf("remaining %d after Return, want %d", got, tt.wantLeft)
			}
		})
	}
}
