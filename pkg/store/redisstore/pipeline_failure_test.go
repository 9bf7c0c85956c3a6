package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestPipelineNeverChargesTwice cuts Redis's connections (CLIENT KILL) while
// pipelines are in flight and then kills Redis itself: callers get errors
// or decisions, within their deadlines, and no pipeline is ever replayed:
// every call has its own key, which afterwards holds at most one hit (and
// exactly one when the call was answered).
func TestPipelineNeverChargesTwice(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	clock := storetest.NewClock(storetest.Epoch())
	const lim = pipelineLimit
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithPoolSize(4),
		redisstore.WithPipeline(time.Millisecond, 0), redisstore.WithTimeout(5*time.Second))
	mustTake(t, s, []store.Request{{Key: "warm", Limit: window(lim), Hits: 0}})

	const callers, calls = 16, 40
	kills := 0
	// Connections are cut every 2 ms for as long as the callers run (a
	// fixed number of kills could all land after a fast run ended).
	answers := hammer(t, s, callers, calls, lim, 200*time.Millisecond, true, func(done <-chan struct{}) {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			n, err := admin.ClientKillByFilter(t.Context(), "TYPE", "normal", "SKIPME", "yes").Result()
			if err != nil {
				t.Errorf("CLIENT KILL: %v", err)
				return
			}
			kills += int(n)
		}
	})
	ok, failed, ranAnyway := checkChargedOnce(t, s, answers, callers, calls)
	t.Logf("%d connections killed; %d decisions, %d errors (%d of them ran before the connection died)", kills, ok, failed, ranAnyway)
	if failed == 0 {
		t.Error("no call failed: the connections were not cut mid-flight")
	}
	if kills == 0 {
		t.Error("no connection was killed: the test did not test anything")
	}
	checkRedisDies(t, srv, s, callers)
}

// checkChargedOnce reads every call's own key (hammer's ownKeys): at most
// one hit each, and exactly one, with the decision the call answered, for
// a call that got an answer. It counts the calls answered, the calls
// failed, and the failed calls that ran before their connection died.
func checkChargedOnce(t *testing.T, s *redisstore.Store, answers []answer, callers, calls int) (ok, failed, ranAnyway int) {
	const lim = pipelineLimit
	for c := range callers {
		check := make([]store.Request, calls)
		for i := range check {
			check[i] = store.Request{Key: callKey(c, i), Limit: window(lim), Hits: 0}
		}
		res := mustTake(t, s, check)
		for i, r := range res {
			a := answers[c*calls+i]
			hits := lim - r.Remaining
			switch {
			case hits > 1:
				t.Errorf("call %s was charged %d times", callKey(c, i), hits)
			case a.err == nil && (hits != 1 || !a.res[0].Allowed || a.res[0].Remaining != lim-1):
				t.Errorf("call %s answered %+v but its key holds %d hits", callKey(c, i), a.res, hits)
			case a.err == nil:
				ok++
			default:
				failed++
				ranAnyway += int(hits)
			}
		}
	}
	return ok, failed, ranAnyway
}

// checkRedisDies stops Redis with pipelines in flight: every call ends,
// with an error or a decision, by its deadline (not REDIS_TIMEOUT's,
// testkit.Slack further), and a Take after fails.
func checkRedisDies(t *testing.T, srv *redistest.Server, s *redisstore.Store, callers int) {
	var wg sync.WaitGroup
	slow := make(chan time.Duration, callers*5)
	for range callers {
		wg.Go(func() {
			for range 5 {
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				start := time.Now()
				_, _ = s.Take(ctx, []store.Request{{Key: "shared", Limit: window(pipelineLimit), Hits: 1}})
				if took := time.Since(start); took > 100*time.Millisecond+testkit.Slack {
					slow <- took
				}
				cancel()
			}
		})
	}
	time.Sleep(2 * time.Millisecond)
	srv.Stop()
	wg.Wait()
	close(slow)
	for took := range slow {
		t.Errorf("a call with a 100ms deadline took %s while Redis died", took)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Take(ctx, batch(1, window(pipelineLimit), 1)); err == nil {
		t.Error("Take succeeded with Redis dead")
	}
}

// TestPipelineCallerDeadlines: behind a pipeline stuck on a server that
// never answers, queued callers still fail by their own deadlines, not the
// pipeline's (REDIS_TIMEOUT, 10 s here, or a later caller's, 2.5 s): the
// short deadlines' guards (testkit.Slack past them) end before either.
func TestPipelineCallerDeadlines(t *testing.T) {
	s := newStore(t, redisstore.WithAddr(hungServer(t)), redisstore.WithTimeout(10*time.Second),
		redisstore.WithPipeline(time.Millisecond, 0), redisstore.WithPoolSize(2))

	deadlines := []time.Duration{30 * time.Millisecond, 60 * time.Millisecond, 2500 * time.Millisecond}
	var wg sync.WaitGroup
	for i := range 24 {
		d := deadlines[i%len(deadlines)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			start := time.Now()
			res, err := s.Take(ctx, batch(1, window(5), 1))
			took := time.Since(start)
			if err == nil {
				t.Errorf("Take against a hung server = %v, want an error", res)
			}
			if took > d+testkit.Slack {
				t.Errorf("a call with a %s deadline took %s", d, took)
			}
		}()
	}
	wg.Wait()
}
