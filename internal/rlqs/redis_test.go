package rlqs_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// redisReplica is a replica with a Redis client of its own, deciding at
// the fake clock's time (Redis keeps the keys' TTLs in its own).
func redisReplica(t *testing.T, addr string, r rlqs.Rules, clock *rlqstest.Clock, opts ...rlqs.Option) *replica {
	t.Helper()
	st, err := redisstore.New(redisstore.WithAddr(addr), redisstore.WithClock(clock.Now), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return startReplica(t, r, st, clock, opts...)
}

func scriptCalls(t *testing.T, c *redis.Client) int64 {
	return redisinfo.ScriptCalls(redistest.CommandStats(t, c))
}

// TestFleetOnRedis is the acceptance run: three simulated Envoys
// (reporting every second, DENY_ALL without an assignment or after one
// expired, the recommended settings) on two replicas sharing one Redis,
// offered three times a fixed window's limit. Every window admits at most
// the limit and at least 95% of it; Redis runs at most one script per
// Envoy per reporting interval; replica 0 is killed mid-window, and its
// Envoys get assignments from replica 1 within two reporting intervals,
// every window still within the limit.
func TestFleetOnRedis(t *testing.T) {
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	// A fake clock from a real window start: Redis sets the keys' TTLs
	// from the times the script is given.
	clock := rlqstest.NewClock(time.Now().Truncate(fleetWindow).Add(fleetWindow))
	r := newRules(t, fleetRules)
	f := newFleet(t, clock, fleetWindow)
	f.reps = []*replica{redisReplica(t, rs.Addr, r, clock), redisReplica(t, rs.Addr, r, clock)}
	for i := range 3 {
		f.envoys = append(f.envoys, newEnvoy(t, clock, rlqstest.Settings{
			Domain: "edge", NoAssignment: denyAll(), Expired: denyAll(), ExpiredFor: time.Hour,
			Addrs: []string{f.reps[i%2].addr, f.reps[(i+1)%2].addr},
		}))
	}
	const perEnvoy = fleetLimit / 10 // 3 Envoys: three times the limit's rate
	calls0 := scriptCalls(t, rdb)

	f.run(2*fleetWindow+1500*time.Millisecond, perEnvoy, hot, nil)
	var moved []*rlqstest.Envoy
	for _, e := range f.envoys {
		if e.Server() == f.reps[0].addr {
			moved = append(moved, e)
		}
	}
	if len(moved) == 0 {
		t.Fatal("no Envoy is on replica 0")
	}
	killed, held := clock.Now(), f.reps[0].srv.Stats().Outstanding
	f.reps[0].kill()
	// The connections drop at once (a killed process's sockets are reset):
	// let the Envoys see it before the clock moves on.
	waitQuick(t, "Envoys to see their stream end", func() bool {
		for _, e := range moved {
			if e.Server() != "" {
				return false
			}
		}
		return true
	})
	resumed := make([]time.Duration, len(moved))
	f.run(2*fleetWindow-1500*time.Millisecond, perEnvoy, hot, func(now time.Time) {
		for i, e := range moved {
			if resumed[i] == 0 && e.AssignedBy(f.reps[1].addr).After(killed) {
				resumed[i] = now.Sub(killed)
			}
		}
	})

	t.Logf("admitted/offered per %s window of %d:%s", fleetWindow, fleetLimit, f.report())
	// The killed replica's blocks stay charged: its window may admit less
	// by what they held unused (the crash bound), never more.
	f.checkBound(fleetLimit)
	f.checkWindows(0, fleetLimit, 0.95, map[int]int{f.windowOf(killed): int(held)})
	for i, d := range resumed {
		if d == 0 || d > 2*time.Second {
			t.Errorf("Envoy %d of the killed replica resumed after %v (0: never), want within 2 reporting intervals", i, d)
		}
	}
	t.Logf("replica 0 killed %v into window %d holding %d unused hits of %d Envoys; they resumed on replica 1 after %v",
		killed.Sub(f.epoch)%fleetWindow, f.windowOf(killed), held, len(moved), resumed)
	intervals := int64(f.clock.Now().Sub(f.epoch) / time.Second)
	calls := scriptCalls(t, rdb) - calls0
	perEnvoyInterval := float64(calls) / float64(3*intervals)
	t.Logf("Redis scripts: %d for 3 Envoys x %d reporting intervals x 1 bucket: %.3f per Envoy per interval", calls, intervals, perEnvoyInterval)
	if perEnvoyInterval > 1 {
		t.Errorf("%.3f Redis calls per Envoy per reporting interval, want at most 1", perEnvoyInterval)
	}
}
