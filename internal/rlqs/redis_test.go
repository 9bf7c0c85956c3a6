package rlqs_test

import (
	"fmt"
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

// TestFailover: three Envoys (reporting every 5 s, DENY_ALL fallbacks) on
// two replicas sharing one Redis, at the limit and at three times it;
// replica 0 is killed 1.5 s into a window. Its Envoys keep the grants it
// charged (the survivor sends them no DENY_ALL: it keeps a grant that
// serves its Envoy, and replaces one that does not with a grant of its
// own while the counter has room), and get the survivor's at the next
// window's turn at the latest; no window admits more than the limit, the
// killed one at least 80% of what the others do (the grants the killed
// replica would have topped up are not: the survivor cannot know what
// they hold); Redis runs at most one script per report and per window
// turn of each Envoy.
func TestFailover(t *testing.T) {
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, load := range []float64{1, 3} {
		t.Run(fmt.Sprintf("%.0fx", load), func(t *testing.T) {
			calls0 := scriptCalls(t, rdb)
			f := failover(t, rs.Addr, load)
			calls := scriptCalls(t, rdb) - calls0
			var reports int64
			for _, r := range f.reps {
				reports += r.srv.Stats().Reports
			}
			turns := int64(3 * (len(f.windows()) - 1))
			t.Logf("Redis scripts: %d for %d reports and %d window turns of 3 Envoys", calls, reports, turns)
			if calls > reports+turns {
				t.Errorf("%d Redis calls, want at most one per report and per Envoy's window turn (%d)", calls, reports+turns)
			}
		})
	}
}

func failover(t *testing.T, addr string, load float64) *fleet {
	// A fake clock from a real window start: Redis sets the keys' TTLs
	// from the times the script is given.
	clock := rlqstest.NewClock(time.Now().Truncate(time.Minute).Add(time.Minute))
	r := newRules(t, fleetRules)
	f := newFleet(t, clock, fleetWindow)
	prefix := rlqs.WithKeyBuilder(keyPrefix(fmt.Sprintf("failover%d_%v", time.Now().UnixNano(), load)))
	f.reps = []*replica{redisReplica(t, addr, r, clock, prefix), redisReplica(t, addr, r, clock, prefix)}
	for i := range 3 {
		set := recommended()
		set.Addrs = []string{f.reps[i%2].addr, f.reps[(i+1)%2].addr}
		f.envoys = append(f.envoys, newEnvoy(t, clock, set))
	}
	perEnvoy := load * fleetLimit / fleetWindow.Seconds() / 3
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
	turn := f.epoch.Add(3 * fleetWindow)
	first := make([]time.Time, len(moved))
	f.run(2*fleetWindow-1500*time.Millisecond, perEnvoy, hot, func(now time.Time) {
		for i, e := range moved {
			if first[i].IsZero() && e.AssignedBy(f.reps[1].addr).After(killed) {
				first[i] = now
			}
		}
	})
	t.Logf("admitted [per Envoy] / offered per %s window of %d:%s", fleetWindow, fleetLimit, f.report())
	t.Logf("replica 0 killed %v into window %d holding %d unused hits of %d Envoys", killed.Sub(f.epoch)%fleetWindow, f.windowOf(killed), held, len(moved))
	f.checkBound(fleetLimit)
	if k, others := f.admitted[2], min(f.admitted[1], f.admitted[3]); float64(k) < 0.8*float64(others) {
		t.Errorf("the window of the kill admitted %d, under 80%% of the least of its neighbours' (%d)", k, others)
	}
	for i, at := range first {
		if at.IsZero() || at.After(turn.Add(tick)) {
			t.Errorf("Envoy %d of the killed replica got its first assignment from replica 1 at %v, want by the next window's turn (%v)", i, at.Sub(f.epoch), turn.Sub(f.epoch))
		}
	}
	t.Logf("the killed replica's Envoys got the survivor's first assignments %v and %v into the run (the turn: %v)", first[0].Sub(f.epoch), first[len(first)-1].Sub(f.epoch), turn.Sub(f.epoch))
	if n := f.reps[1].srv.Stats().DenyAll; n != 0 {
		t.Errorf("the survivor sent %d DENY_ALL, want none: its counter had room", n)
	}
	return f
}
