package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// TestClusterPipeline: on Cluster each master gets its own pipeline, the
// takes of one slot share a script call, and every decision is still its
// own: concurrent callers on one key per master are each charged once, and
// the masters see fewer reads and script calls than decisions.
func TestClusterPipeline(t *testing.T) {
	nodes, admins := startCluster(t)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)),
		redisstore.WithPipeline(2*time.Millisecond, 0), redisstore.WithPoolSize(4), fixedClock())
	keys := keysOnMasters(t, admins, "cp")
	const lim = 1_000_000
	for _, k := range keys { // loads the library on every master
		mustTake(t, s, []store.Request{{Key: k, Limit: window(lim), Hits: 0}})
	}
	reads0, scripts0 := 0, 0
	for _, a := range admins {
		reads0 += infoStat(t, a, "stats", "total_reads_processed")
		scripts0 += scriptRuns(t, a)
	}

	const callers, calls = 30, 20
	remaining := make([]map[uint64]bool, len(keys))
	for i := range remaining {
		remaining[i] = map[uint64]bool{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				k := (c + i) % len(keys)
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				res, err := s.Take(ctx, []store.Request{{Key: keys[k], Limit: window(lim), Hits: 1}})
				cancel()
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				mu.Lock()
				if remaining[k][res[0].Remaining] {
					t.Errorf("two decisions on %s left %d: a decision was shared or replayed", keys[k], res[0].Remaining)
				}
				remaining[k][res[0].Remaining] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	reads, scripts := 0, 0
	for _, a := range admins {
		reads += infoStat(t, a, "stats", "total_reads_processed")
		scripts += scriptRuns(t, a)
	}
	// Less the INFOs themselves: two per master before, and one after.
	reads, scripts = reads-reads0-3*len(admins), scripts-scripts0
	decisions := callers * calls
	for k, key := range keys {
		res := mustTake(t, s, []store.Request{{Key: key, Limit: window(lim), Hits: 0}})
		if got := lim - res[0].Remaining; got != uint64(len(remaining[k])) {
			t.Errorf("%s holds %d hits for %d decisions", key, got, len(remaining[k]))
		}
	}
	t.Logf("%d decisions on %d masters: %d reads, %d script calls", decisions, len(admins), reads, scripts)
	if reads >= decisions/2 || scripts >= decisions/2 {
		t.Errorf("%d reads and %d script calls for %d decisions: the masters' pipelines did not coalesce", reads, scripts, decisions)
	}
}

// TestClusterPipelineSpansSlots: requests whose counters span the three
// masters (a slot group per master, each asking for its denials) merge into
// shared script calls on each master, and stay all-or-nothing: with one
// counter's limit far below the load, every counter ends holding exactly the
// admitted requests' hits (a denied request's groups that charged were
// undone exactly), and no more were admitted than that limit.
func TestClusterPipelineSpansSlots(t *testing.T) {
	nodes, admins := startCluster(t)
	s := newStore(t, redisstore.WithType(redisstore.Cluster), redisstore.WithAddr(redistest.Addrs(nodes)),
		redisstore.WithPipeline(2*time.Millisecond, 0), redisstore.WithPoolSize(4), fixedClock())
	keys := keysOnMasters(t, admins, "span")
	const tight, wide = 150, 1_000_000
	limits := []uint64{tight, wide, wide}
	request := func(hits uint64) []store.Request {
		reqs := make([]store.Request, len(keys))
		for i, k := range keys {
			reqs[i] = store.Request{Key: k, Limit: window(limits[i]), Hits: hits}
		}
		return reqs
	}
	mustTake(t, s, request(0)) // loads the library on every master
	scripts0 := 0
	for _, a := range admins {
		scripts0 += scriptRuns(t, a)
	}

	const callers, calls = 30, 10
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				res, err := s.Take(ctx, request(1))
				cancel()
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				if allowed(res) {
					admitted.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	scripts := -scripts0
	for _, a := range admins {
		scripts += scriptRuns(t, a)
	}
	groups := callers * calls * len(keys)
	t.Logf("%d requests over %d masters: %d admitted, %d denied; %d script calls (takes and undos) for %d slot groups",
		callers*calls, len(keys), admitted.Load(), denied.Load(), scripts, groups)
	if admitted.Load() > tight || denied.Load() == 0 {
		t.Fatalf("%d admitted, %d denied at a limit of %d", admitted.Load(), denied.Load(), tight)
	}
	res := mustTake(t, s, request(0))
	for i, k := range keys {
		if got := limits[i] - res[i].Remaining; got != uint64(admitted.Load()) {
			t.Errorf("%s holds %d hits for %d admitted requests", k, got, admitted.Load())
		}
	}
	// A denied request undoes at most its two other groups, each in a call
	// of its own: the rest are the takes' calls.
	if takes := scripts - 2*int(denied.Load()); takes >= groups/2 {
		t.Errorf("%d script calls for %d slot groups and %d denials: the groups' takes did not merge", scripts, groups, denied.Load())
	}
}

// allowed reports whether every decision of a request was an admission.
func allowed(res []store.Result) bool {
	for _, r := range res {
		if !r.Allowed {
			return false
		}
	}
	return true
}
