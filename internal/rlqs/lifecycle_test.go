package rlqs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// recommended are the filter settings docs/rlqs.md recommends.
func recommended() rlqstest.Settings {
	return rlqstest.Settings{Domain: "edge", NoAssignment: denyAll(), Expired: denyAll(), ExpiredFor: time.Hour}
}

// describe is how e decides id now.
func describe(e *rlqstest.Envoy, id map[string]string) string { return e.Describe(id) }

// TestReload: a reload reaches every stream within the server's poll (a
// second): a bucket whose limit changed gets a grant under the new limit
// (a limit on the same counter keeps what the old grants charged),
// one whose rule can no longer be served in blocks is abandoned (Envoy
// falls back to its no-assignment behavior), one whose rule is gone is
// allowed, as the rate limit service answers OK for it.
func TestReload(t *testing.T) {
	f, r := newMemFleet(t, fleetRules, 1, 1, recommended())
	e := f.envoys[0]
	f.run(2*time.Second, 10, hot, nil)
	before := describe(e, hot)
	if !strings.Contains(before, "token_bucket") {
		t.Fatalf("before the reload: %s, want a token bucket", before)
	}
	steps := []struct {
		rules string
		want  string
	}{
		// A new window is a new counter: a fresh grant of a quarter of
		// 40, a reporting interval's share of it to start with.
		{strings.Replace(fleetRules, "unit_multiplier: 10, requests_per_unit: 600", "unit_multiplier: 20, requests_per_unit: 40", 1), "token_bucket("},
		{strings.Replace(fleetRules, "requests_per_unit: 600", "requests_per_unit: 600, algorithm: gcra", 1), "no assignment"},
		{"domain: edge\n", "allow_all"},
	}
	for _, st := range steps {
		r.set(t, st.rules)
		f.run(2*time.Second, 10, hot, nil)
		if d := describe(e, hot); !strings.HasPrefix(d, st.want) {
			t.Errorf("after reloading\n%s\nthe bucket is decided by %s, want %s", st.rules, d, st.want)
		}
	}
	if st := f.reps[0].srv.Stats(); st.Abandoned != 1 {
		t.Errorf("%d buckets abandoned, want 1 (the gcra rule's)", st.Abandoned)
	}
}

// TestIdleBucketAbandoned: a bucket that reports no request for a minute
// is abandoned (at the first report a minute after its first empty one):
// Envoy forgets it, and stops reporting it.
func TestIdleBucketAbandoned(t *testing.T) {
	f, _ := newMemFleet(t, fleetRules, 1, 1, recommended())
	e := f.envoys[0]
	f.run(time.Second, 10, hot, nil)
	f.run(50*time.Second, 0, hot, nil)
	if d := describe(e, hot); d == "no bucket" {
		t.Fatalf("abandoned after 50 idle seconds")
	}
	f.run(25*time.Second, 0, hot, nil)
	if d := describe(e, hot); d != "no bucket" {
		t.Fatalf("after 75 idle seconds the bucket is decided by %s, want abandoned", d)
	}
	if st := f.reps[0].srv.Stats(); st.Abandoned != 1 || st.Buckets != 0 {
		t.Errorf("Stats: %d abandoned, %d buckets left; want 1, 0", st.Abandoned, st.Buckets)
	}
}

// outageRules: one rule per on_store_error answer.
const outageRules = `
domain: edge
descriptors:
  - key: route
    value: allow
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 600, on_store_error: allow}
  - key: route
    value: deny
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 600, on_store_error: deny}
  - key: route
    value: unavailable
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 600}
`

// TestRedisOutage: while Redis is down, a bucket that needs a block (here
// at a window's turn) gets what its rule's on_store_error says: ALLOW_ALL,
// DENY_ALL, or nothing (Envoy's expired behavior decides); once Redis is
// back, blocks again, and the requests ALLOW_ALL admitted are recorded in
// the counter.
func TestRedisOutage(t *testing.T) {
	rs := redistest.StartProcess(t)
	clock := rlqstest.NewClock(time.Now().Truncate(fleetWindow).Add(fleetWindow))
	r := newRules(t, outageRules)
	f := newFleet(t, clock, fleetWindow)
	f.reps = []*replica{redisReplica(t, rs.Addr, r, clock)}
	ids := map[string]map[string]string{}
	for _, name := range []string{"allow", "deny", "unavailable"} {
		set := recommended()
		set.Addrs = []string{f.reps[0].addr}
		f.envoys = append(f.envoys, newEnvoy(t, clock, set))
		ids[name] = map[string]string{"route": name}
	}
	run := func(d time.Duration) {
		for end := clock.Now().Add(d); clock.Now().Before(end); {
			step(t, clock, tick, f.reps, f.envoys)
			for i, name := range []string{"allow", "deny", "unavailable"} {
				f.envoys[i].Request(ids[name])
			}
		}
	}
	run(fleetWindow - 2*time.Second)
	rs.Stop()
	run(4 * time.Second) // across the window's turn
	for i, want := range []string{"allow_all", "deny_all", "fallback deny_all"} {
		if d := describe(f.envoys[i], ids[[]string{"allow", "deny", "unavailable"}[i]]); !strings.HasPrefix(d, want) {
			t.Errorf("Redis down, on_store_error %s: decided by %s, want %s", []string{"allow", "deny", "unavailable"}[i], d, want)
		}
	}
	if st := f.reps[0].srv.Stats(); st.StoreErrors == 0 {
		t.Fatalf("no store error counted: %+v", st)
	}
	rs.Restart(t)
	// The store's breaker lets calls through again after its probe (in
	// real time) answers.
	testkit.WaitForNil(t, 10*time.Second, "the store to answer again", func() error {
		_, err := f.reps[0].store.Take(t.Context(), []store.Request{{Key: "probe", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Second}}})
		return err
	})
	run(4 * time.Second) // past the next report
	for i, name := range []string{"allow", "deny", "unavailable"} {
		if d := describe(f.envoys[i], ids[name]); !strings.HasPrefix(d, "token_bucket") {
			t.Errorf("Redis back, %s: decided by %s, want a token bucket", name, d)
		}
	}
	if st := f.reps[0].srv.Stats(); st.Recorded == 0 {
		t.Errorf("nothing recorded after the outage: %+v", st)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if n := scriptCalls(t, rdb); n == 0 {
		t.Errorf("no script ran on the restarted Redis")
	}
}
