package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func TestAdminConformance(t *testing.T) {
	flushed := func(t *testing.T, addrs ...string) {
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			if err := c.FlushAll(t.Context()).Err(); err != nil {
				t.Fatalf("FLUSHALL on %s: %v", a, err)
			}
			_ = c.Close()
		}
	}
	t.Run("single", func(t *testing.T) {
		srv := redistest.Start(t)
		storetest.RunAdmin(t, func(t *testing.T, clock *storetest.Clock) storetest.Admin {
			flushed(t, srv.Addr)
			return newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now))
		}, false)
	})
	t.Run("sentinel", func(t *testing.T) {
		master := redistest.Start(t)
		sentinel := redistest.StartSentinel(t, "mymaster", master.Addr)
		storetest.RunAdmin(t, func(t *testing.T, clock *storetest.Clock) storetest.Admin {
			flushed(t, master.Addr)
			return newStore(t, redisstore.WithType(redisstore.Sentinel), redisstore.WithAddr("mymaster,"+sentinel), redisstore.WithClock(clock.Now))
		}, false)
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := redistest.StartCluster(t, 3)
		var addrs []string
		for _, n := range nodes {
			addrs = append(addrs, n.Addr)
		}
		storetest.RunAdmin(t, func(t *testing.T, clock *storetest.Clock) storetest.Admin {
			flushed(t, addrs...)
			return newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), redisstore.WithClock(clock.Now))
		}, false)
		// Keys on every master are listed (none expiring with its window
		// between the takes and the listing: fixedClock).
		flushed(t, addrs...)
		s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock())
		var reqs []store.Request
		for i := range 30 {
			reqs = append(reqs, store.Request{Key: fmt.Sprintf("{spread:%d}", i), Limit: window(5), Hits: 1})
		}
		for _, r := range reqs {
			mustTake(t, s, []store.Request{r})
		}
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			if n, err := c.DBSize(t.Context()).Result(); err != nil || n == 0 {
				t.Errorf("master %s holds %d keys (%v); the test needs them on every master", a, n, err)
			}
			_ = c.Close()
		}
		keys, next, err := s.List(t.Context(), "{spread:", "", 100, time.Now().Add(time.Second))
		if err != nil || next != "" || len(keys) != 30 {
			t.Errorf("List over 3 masters: %d keys, next %q, %v; want all 30 in one page", len(keys), next, err)
		}
	})
}

// A listing of a few keys among many others is time-bounded per call: a
// page whose deadline has passed still makes progress with one SCAN, and
// stops there with a cursor; the pages together hold every key. Counting
// SCANs (INFO commandstats) rather than timing pages keeps the test exact
// on a loaded machine.
func TestListBoundedInTime(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	const others, ours = 200_000, 500
	for i := 0; i < others; i += 10_000 {
		pipe := c.Pipeline()
		for j := i; j < i+10_000; j++ {
			pipe.Set(t.Context(), fmt.Sprintf("{other:%d}", j), "x", 0)
		}
		if _, err := pipe.Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	pipe := c.Pipeline()
	for j := range ours {
		pipe.Set(t.Context(), fmt.Sprintf("{ours:%d}", j), "x", 0)
	}
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, redisstore.WithAddr(srv.Addr))
	scansBefore := commandStats(t, c)["scan"]
	found := map[string]bool{}
	cursor, pages, slowest := "", 0, time.Duration(0)
	start := time.Now()
	for {
		t0 := time.Now()
		keys, next, err := s.List(t.Context(), "{ours:", cursor, 100, t0)
		if err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
		for _, k := range keys {
			found[k] = true
		}
		pages++
		if cursor = next; cursor == "" {
			break
		}
	}
	scans := commandStats(t, c)["scan"] - scansBefore
	t.Logf("%d of %d keys listed in %d pages of one SCAN each, %s in all, slowest page %s", len(found), others+ours, pages, time.Since(start), slowest)
	if len(found) != ours {
		t.Errorf("listed %d keys, want %d", len(found), ours)
	}
	if scans != pages {
		t.Errorf("%d SCANs for %d pages past their deadline, want one each", scans, pages)
	}
	if pages < 2 {
		t.Errorf("%d page(s): 200,500 keys in one SCAN means the deadline was not applied", pages)
	}
}
