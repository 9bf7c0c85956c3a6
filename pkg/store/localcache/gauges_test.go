package localcache_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
)

// TestGaugesCountKeysAsEnvoyproxy replays envoyproxy's own integration
// test of its local cache (testBasicBaseConfig) and holds hitCount and
// missCount to the values it asserts after every call: one lookup per key.
func TestGaugesCountKeysAsEnvoyproxy(t *testing.T) {
	r := newRig(t, 1<<20)
	r.clock.Advance(time.Second) // a second into the minute and the hour
	perMinute := func(n uint64) algorithms.Limit {
		return algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: n, Period: time.Minute}
	}
	perHour := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Hour}
	check := func(step string, hits, misses uint64) {
		t.Helper()
		g := r.cache.Gauges()
		if g.HitCount != hits || g.MissCount != misses || g.LookupCount != hits+misses {
			t.Fatalf("%s: hit %d miss %d lookup %d, want %d %d %d", step, g.HitCount, g.MissCount, g.LookupCount, hits, misses, hits+misses)
		}
	}
	r.take(req("key1", perMinute(50), 1))
	check("key1", 0, 1)
	for i := range 25 {
		r.take(req("key2", perMinute(20), 1))
		switch {
		case i < 20:
			check(fmt.Sprint("key2 #", i), 0, uint64(i)+2)
		default:
			// The 21st is denied by the backend and cached; the rest hit.
			check(fmt.Sprint("key2 #", i), uint64(i)-20, 22)
		}
	}
	for i := range 15 {
		res := r.take(req("key2b", perMinute(20), 1), req("key3", perHour, 1))
		switch {
		case i < 10:
			check(fmt.Sprint("key2b+key3 #", i), 4, uint64(i)*2+24)
		case i == 10:
			check(fmt.Sprint("key2b+key3 #", i), 4, 44)
		default:
			// key3's denial is cached; key2b is not, so the backend decides
			// both and confirms key3's: a denial the cache knew.
			check(fmt.Sprint("key2b+key3 #", i), uint64(i)-6, uint64(i)+34)
			if !res[1].CachedDenial || res[1].FromCache || res[0].CachedDenial {
				t.Fatalf("#%d: results %+v, want key3 a confirmed cached denial", i, res)
			}
		}
	}
	g := r.cache.Gauges()
	if g.EntryCount != 2 || g.ExpiredCount != 0 || g.EvacuateCount != 0 {
		t.Fatalf("gauges %+v, want 2 entries, none expired or evacuated", g)
	}
	// key3 was denied again by the backend four times: four overwrites.
	if g.OverwriteCount != 4 {
		t.Fatalf("overwrites %d, want 4", g.OverwriteCount)
	}
	if want := r.clock.Now().Unix(); g.AverageAccessTime != want {
		t.Fatalf("average access time %d, want %d", g.AverageAccessTime, want)
	}

	// key2's minute ends: its entry is found expired, dropped, and a miss.
	r.clock.Advance(time.Minute)
	r.take(req("key2", perMinute(20), 1))
	g = r.cache.Gauges()
	if g.ExpiredCount != 1 || g.EntryCount != 1 || g.MissCount != 49 {
		t.Fatalf("after key2's window: %+v, want 1 expired, 1 entry, 49 misses", g)
	}
}

func TestGaugesEvacuateAndAccessTime(t *testing.T) {
	r := newRig(t, 1024)
	start := r.clock.Now().Unix()
	n := 0
	for i := 0; r.cache.Gauges().EvacuateCount == 0; i++ {
		r.take(req(fmt.Sprintf("key-%04d", i), fw(0), 1))
		r.clock.Advance(time.Second)
		n++
	}
	g := r.cache.Gauges()
	entries, _ := r.cache.Len()
	if g.EntryCount != uint64(entries) || g.EvacuateCount != 1 || int(g.EntryCount) != n-1 {
		t.Fatalf("after %d keys: %+v, want %d entries and one evacuated", n, g, n-1)
	}
	// Entries were used at start+1 .. start+n-1 (the first evacuated): the
	// mean of those seconds.
	if want := start + int64(n)/2; g.AverageAccessTime != want {
		t.Fatalf("average access time %d, want %d", g.AverageAccessTime, want)
	}
	_, _ = r.one(req("key-0001", fw(0), 1)) // a hit moves its access time to now
	if g2 := r.cache.Gauges(); g2.AverageAccessTime <= g.AverageAccessTime {
		t.Fatalf("average access time %d after a hit, want above %d", g2.AverageAccessTime, g.AverageAccessTime)
	}
	if empty := localcache.New(r.backend, 1024).Gauges(); empty != (localcache.Gauges{}) {
		t.Fatalf("an empty cache's gauges: %+v", empty)
	}
}
