package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// TestPipelineBatchLimit: REDIS_BATCH_LIMIT caps the takes one script call
// decides (more make several calls in one pipeline), and capped or not every
// decision is still its own, charged once.
func TestPipelineBatchLimit(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	const batch, callers, calls = 3, 24, 15
	s := newStore(t, redisstore.WithAddr(srv.Addr), fixedClock(), redisstore.WithPoolSize(4),
		redisstore.WithPipeline(2*time.Millisecond, 0), redisstore.WithBatchLimit(batch))
	mustTake(t, s, []store.Request{{Key: "warm", Limit: window(pipelineLimit), Hits: 0}}) // loads the library
	runs0 := scriptRuns(t, admin)
	answers := hammer(t, s, callers, calls, pipelineLimit, 5*time.Second, false, nil)
	runs := scriptRuns(t, admin) - runs0
	decisions := callers * calls
	if n := remainingSet(t, answers); n != decisions {
		t.Fatalf("%d distinct decisions of %d calls", n, decisions)
	}
	if got := charged(t, s, pipelineLimit); got != uint64(decisions) {
		t.Fatalf("counter holds %d hits for %d decisions", got, decisions)
	}
	t.Logf("%d decisions in %d script calls at a cap of %d", decisions, runs, batch)
	if runs*batch < decisions {
		t.Errorf("%d script calls for %d decisions: more than %d takes in a call", runs, decisions, batch)
	}
	if runs >= decisions {
		t.Errorf("%d script calls for %d decisions: nothing merged", runs, decisions)
	}
}

// TestPipelineBatchRefusedWhole: merged calls that Redis refuses whole
// (the library flushed under them: "Function not found"; or maxmemory
// reached: OOM), which certainly ran nothing, charge none of their takes;
// a caller whose take was refused is answered an error or, after the library
// is loaded again, its own decision, charged once.
func TestPipelineBatchRefusedWhole(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	s := newStore(t, redisstore.WithAddr(srv.Addr), fixedClock(), redisstore.WithPoolSize(4),
		redisstore.WithPipeline(time.Millisecond, 0))
	mustTake(t, s, []store.Request{{Key: "warm", Limit: window(pipelineLimit), Hits: 0}})
	ctx := t.Context()
	const callers, calls = 16, 30
	flushes, ooms := 0, 0
	answers := hammer(t, s, callers, calls, pipelineLimit, 2*time.Second, true, func(done <-chan struct{}) {
		for i := 0; ; i++ {
			select {
			case <-done:
				_ = admin.ConfigSet(ctx, "maxmemory", "0").Err()
				return
			case <-time.After(time.Millisecond):
			}
			var err error
			switch i % 4 {
			case 0:
				err = admin.FunctionFlush(ctx).Err()
				flushes++
			case 1:
				err = admin.ConfigSet(ctx, "maxmemory", "1").Err()
				ooms++
			case 2:
				err = admin.ConfigSet(ctx, "maxmemory", "0").Err()
			}
			if err != nil {
				t.Errorf("admin: %v", err)
				return
			}
		}
	})
	ok, failed, ranAnyway := checkChargedOnce(t, s, answers, callers, calls)
	errs, err := admin.Info(ctx, "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d flushes, %d OOM windows: %d decisions, %d errors; Redis's errors:\n%s", flushes, ooms, ok, failed, errs)
	if ranAnyway > 0 {
		t.Errorf("%d calls answered an error were charged", ranAnyway)
	}
	if !strings.Contains(errs, "errorstat_OOM:") || !strings.Contains(errs, "errorstat_ERR:") {
		t.Error("Redis refused no script call for OOM and found no missing function: the test did not test anything")
	}
	if ok == 0 {
		t.Error("no call was decided")
	}
}
