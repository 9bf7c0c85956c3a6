package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	storetest.Run(t, func(t *testing.T, clock *storetest.Clock) store.Store {
		// One server for the whole suite; each store starts from an empty one.
		if err := admin.FlushAll(t.Context()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
		return newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now))
	})
}

func newStore(t *testing.T, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(opts...)
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fixedClock passes the scripts a fixed now in place of Redis TIME, for a
// test that makes several calls against one-minute windows and checks
// exact counts: on the real clock a run that straddles a minute boundary
// sees its counters start over, and their keys expire, between two calls.
func fixedClock() redisstore.Option { return redisstore.WithClock(storetest.Epoch) }

func window(n uint64) algorithms.Limit {
	return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: time.Minute}
}

func batch(n int, lim algorithms.Limit, hits uint64) []store.Request {
	reqs := make([]store.Request, n)
	for i := range reqs {
		reqs[i] = store.Request{Key: string(rune('a' + i)), Limit: lim, Hits: hits}
	}
	return reqs
}

func mustTake(t *testing.T, s *redisstore.Store, reqs []store.Request) []store.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	res, err := s.Take(ctx, reqs)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return res
}

// TestRedisTime checks the production clock: no WithClock, so the script
// reads Redis TIME; a minute window then resets within a minute.
func TestRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, redisstore.WithAddr(srv.Addr))
	res := mustTake(t, s, batch(1, window(5), 2))
	d := res[0].Decision
	if !d.Allowed || d.Remaining != 3 || d.ResetAfter <= 0 || d.ResetAfter > time.Minute {
		t.Fatalf("fixed window on Redis TIME: %+v, want allowed, remaining 3, reset in (0, 1m]", d)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}
