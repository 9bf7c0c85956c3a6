package envoystats

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// spentCache is a real local cache over a memstore after a key's limit of
// one was spent, then denied twice (once by the backend, once from the
// cache): 1 hit, 2 misses, 1 entry.
func spentCache(t *testing.T) *localcache.Store {
	t.Helper()
	now := func() time.Time { return time.Unix(1_800_000_000, 0) }
	c := localcache.New(memstore.New(memstore.WithClock(now)), 1<<20, localcache.WithClock(now))
	t.Cleanup(func() { _ = c.Close() })
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Minute}
	for range 3 {
		if _, err := c.Take(context.Background(), []store.Request{{Key: "k", Limit: lim, Hits: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// localCacheLines are envoyproxy's names for spentCache's figures.
var localCacheLines = []string{
	"ratelimit.localcache.hitCount:1|g",
	"ratelimit.localcache.missCount:2|g",
	"ratelimit.localcache.lookupCount:3|g",
	"ratelimit.localcache.entryCount:1|g",
	"ratelimit.localcache.evacuateCount:0|g",
	"ratelimit.localcache.expiredCount:0|g",
	"ratelimit.localcache.overwriteCount:0|g",
	"ratelimit.localcache.averageAccessTime:1800000000|g",
}

func TestLocalCacheGaugesOverStatsd(t *testing.T) {
	conn, sink := udpStatsd(t)
	s := New(sink)
	defer s.Close()
	s.AddLocalCache(spentCache(t))
	s.Flush()
	readLines(t, conn, func(l []string) bool { return contains(l, localCacheLines...) })
}

func TestLocalCacheGaugesOverDogStatsd(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sink, err := NewDogStatsd("127.0.0.1", conn.LocalAddr().(*net.UDPAddr).Port, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(sink, WithExtraTags(map[string]string{"env": "prod"}))
	defer s.Close()
	s.AddLocalCache(spentCache(t))
	s.Flush()
	want := make([]string, len(localCacheLines))
	for i, l := range localCacheLines {
		want[i] = l + "|#env:prod"
	}
	readLines(t, conn, func(l []string) bool { return contains(l, want...) })
}

// TestLocalCacheGaugesOverPrometheus: through the same mapper as the other
// stats, unmapped: the name itself, dots as underscores, as statsd_exporter
// exports envoyproxy's.
func TestLocalCacheGaugesOverPrometheus(t *testing.T) {
	p, err := NewPrometheus("", false)
	if err != nil {
		t.Fatal(err)
	}
	s := New(p)
	defer s.Close()
	s.AddLocalCache(spentCache(t))
	s.Flush()
	want := []string{
		"ratelimit_localcache_averageAccessTime{} 1800000000",
		"ratelimit_localcache_entryCount{} 1",
		"ratelimit_localcache_evacuateCount{} 0",
		"ratelimit_localcache_expiredCount{} 0",
		"ratelimit_localcache_hitCount{} 1",
		"ratelimit_localcache_lookupCount{} 3",
		"ratelimit_localcache_missCount{} 2",
		"ratelimit_localcache_overwriteCount{} 0",
	}
	got := series(t, p, "ratelimit_localcache_")
	if len(got) != len(want) {
		t.Fatalf("series %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("series %q, want %q", got[i], want[i])
		}
	}
}
