package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// Slot must agree with the server's CLUSTER KEYSLOT, hash-tag corner cases
// included.
func TestSlotMatchesClusterKeyslot(t *testing.T) {
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	keys := []string{"", "a", "123456789", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}",
		"{}", "}{", "{a", "a}", "rl:{edge:7:user_id:5:alice}:fixed_window:60s", "{d%7B:1:k:1:v}:gcra:1s", "\xff\x00{\x80}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("{edge:4:user:%d:u%d}:token_bucket:1s", len(fmt.Sprint(i))+1, i))
	}
	for _, k := range keys {
		want, err := admin.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := redisstore.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

func startCluster(t *testing.T) (nodes []*redistest.Server, admins []*redis.Client) {
	t.Helper()
	nodes = redistest.StartCluster(t, 3)
	return nodes, redistest.Clients(t, nodes)
}

// keysOnMasters returns one key per master, with distinct slots.
func keysOnMasters(t *testing.T, admins []*redis.Client, prefix string) []string {
	t.Helper()
	var keys []string
	for _, a := range admins {
		for i := 0; ; i++ {
			k := fmt.Sprintf("{%s%d}", prefix, i)
			// The node answers MOVED for a slot it does not serve.
			if err := a.Get(t.Context(), k).Err(); err != nil && !errors.Is(err, redis.Nil) {
				continue
			}
			keys = append(keys, k)
			break
		}
	}
	return keys
}

// A denied cross-slot batch leaves every counter as it found it, for every
// algorithm, and costs one script per slot group plus one undo per group
// that charged; a one-slot batch stays one script.
func TestCrossSlotAllOrNothing(t *testing.T) {
	nodes, admins := startCluster(t)
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)),
		redisstore.WithClock(func() time.Time { return now }))
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			lim := algorithms.Limit{Algorithm: alg, Requests: 3, Period: time.Minute}
			if alg.Info().Bucket {
				lim.Burst = 3
			}
			r := crossSlotRig{t: t, s: s, admins: admins, keys: keysOnMasters(t, admins, alg.String()), lim: lim}
			// Load the library on every node so "Function not found" does not count.
			for _, a := range admins {
				if err := a.FunctionLoadReplace(t.Context(), scripts.Library()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			mustTake(t, s, r.req(1, 1, 0))
			before := r.peek()
			if want := []uint64{2, 2, 3}; fmt.Sprint(before) != fmt.Sprint(want) {
				t.Fatalf("after one hit on two keys: remaining %v, want %v", before, want)
			}
			r.resetStats()
			one := mustTake(t, s, []store.Request{{Key: r.keys[0], Limit: lim, Hits: 1}})
			if got := r.scriptCalls(); got != 1 || !one[0].Allowed {
				t.Errorf("one-descriptor request: %d scripts (want 1), %+v", got, one[0].Decision)
			}
			before = r.peek()
			r.resetStats()
			// keys[0] has 1 left: asking 2 denies the whole batch.
			res := mustTake(t, s, r.req(2, 1, 1))
			if res[0].Allowed {
				t.Fatalf("exhausted counter allowed: %+v", res[0].Decision)
			}
			if got := r.scriptCalls(); got != 3+2 {
				t.Errorf("denied 3-slot request ran %d scripts, want 3 takes + 2 undos", got)
			}
			if after := r.peek(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("denied cross-slot request changed counters: %v -> %v", before, after)
			}
			r.resetStats()
			res = mustTake(t, s, r.req(1, 1, 1))
			for i, d := range res {
				if !d.Allowed {
					t.Errorf("op %d denied in an admissible batch: %+v", i, d.Decision)
				}
			}
			if got := r.scriptCalls(); got != 3 {
				t.Errorf("admitted 3-slot request ran %d scripts, want 3", got)
			}
			if after := r.peek(); fmt.Sprint(after) != fmt.Sprint([]uint64{before[0] - 1, before[1] - 1, before[2] - 1}) {
				t.Errorf("admitted request: remaining %v -> %v, want one less each", before, after)
			}
		})
	}
}

// crossSlotRig is a store on a cluster, the cluster's nodes and one key
// on each master, all under lim.
type crossSlotRig struct {
	t      *testing.T
	s      *redisstore.Store
	admins []*redis.Client
	keys   []string
	lim    algorithms.Limit
}

// scriptCalls is how many scripts the masters ran since resetStats.
func (r crossSlotRig) scriptCalls() int {
	n := 0
	for _, a := range r.admins {
		st := commandStats(r.t, a)
		n += st["evalsha"] + st["eval"] + st["fcall"]
	}
	return n
}

func (r crossSlotRig) resetStats() {
	for _, a := range r.admins {
		if err := a.ConfigResetStat(r.t.Context()).Err(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// req is a batch of hits[i] on keys[i].
func (r crossSlotRig) req(hits ...uint64) []store.Request {
	var reqs []store.Request
	for i, k := range r.keys {
		reqs = append(reqs, store.Request{Key: k, Limit: r.lim, Hits: hits[i]})
	}
	return reqs
}

// peek is what each key has remaining, read with a check that charges none.
func (r crossSlotRig) peek() []uint64 {
	res := mustTake(r.t, r.s, r.req(0, 0, 0))
	out := make([]uint64, len(res))
	for i, d := range res {
		out[i] = d.Remaining
	}
	return out
}

// Quota descriptors spread over slots are decided together: the request is
// denied only when every quota counter is, wherever they live.
func TestCrossSlotQuota(t *testing.T) {
	nodes, admins := startCluster(t)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock())
	keys := keysOnMasters(t, admins, "quota")
	lim := window(2)
	remaining := func(k string) uint64 {
		return mustTake(t, s, []store.Request{{Key: k, Limit: lim}})[0].Remaining
	}
	exhaust := func(k string) {
		mustTake(t, s, []store.Request{{Key: k, Limit: lim, Hits: remaining(k)}})
		if n := remaining(k); n != 0 {
			t.Fatalf("%s: %d left after exhausting it", k, n)
		}
	}
	reqs := []store.Request{
		{Key: keys[0], Limit: lim, Hits: 1, Mode: algorithms.Quota},
		{Key: keys[1], Limit: lim, Hits: 1, Mode: algorithms.Quota},
		{Key: keys[2], Limit: lim, Hits: 1},
	}
	exhaust(keys[0])
	res := mustTake(t, s, reqs)
	if res[0].Allowed || !res[1].Allowed || !res[2].Allowed {
		t.Fatalf("one quota counter left: %+v", res)
	}
	if remaining(keys[1]) != 1 || remaining(keys[2]) != 1 {
		t.Errorf("admitted by the other quota: remaining %d, %d, want 1, 1", remaining(keys[1]), remaining(keys[2]))
	}
	exhaust(keys[1])
	res = mustTake(t, s, reqs)
	if store.VerdictOf(reqs, res).Denied() != true {
		t.Fatalf("every quota counter exhausted but admitted: %+v", res)
	}
	if remaining(keys[2]) != 1 {
		t.Errorf("denied request left the enforced counter at %d, want 1", remaining(keys[2]))
	}
}

// Usage spread over slots is recorded on every slot, never undone, and
// past the limit; the request's admissions stay all-or-nothing.
func TestCrossSlotUsage(t *testing.T) {
	nodes, admins := startCluster(t)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)), fixedClock())
	keys := keysOnMasters(t, admins, "usage")
	lim := window(10)
	check := func() []store.Result {
		var reqs []store.Request
		for _, k := range keys {
			reqs = append(reqs, store.Request{Key: k, Limit: lim})
		}
		return mustTake(t, s, reqs)
	}
	// Usage past the limit on one master, an admission on another, usage
	// within the limit on the third: denied, the admission undone, both
	// reports kept.
	res := mustTake(t, s, []store.Request{
		{Key: keys[0], Limit: lim, Hits: 15, Usage: true},
		{Key: keys[1], Limit: lim, Hits: 1},
		{Key: keys[2], Limit: lim, Hits: 3, Usage: true},
	})
	if res[0].Allowed || res[0].Remaining != 0 || !res[1].Allowed || !res[2].Allowed || res[2].Remaining != 7 {
		t.Fatalf("usage 15 of 10, admission, usage 3 of 10: %+v", res)
	}
	got := check()
	if got[0].Allowed || got[0].Remaining != 0 || got[1].Remaining != 10 || got[2].Remaining != 7 {
		t.Errorf("after the denied request: %+v, want [over 0, 10 left, 7 left]", got)
	}
	// A report on an over counter is still recorded; the others' too.
	res = mustTake(t, s, []store.Request{
		{Key: keys[0], Limit: lim, Hits: 1, Usage: true},
		{Key: keys[1], Limit: lim, Hits: 4, Usage: true},
	})
	if res[0].Allowed || !res[1].Allowed || res[1].Remaining != 6 {
		t.Fatalf("reports on an over and a fresh counter: %+v", res)
	}
	if got := check(); got[1].Remaining != 6 {
		t.Errorf("the report beside an over counter was not kept: %+v", got)
	}
}
