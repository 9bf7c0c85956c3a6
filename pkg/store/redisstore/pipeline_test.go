package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// hammer runs callers goroutines, each making calls Takes of one hit (limit
// lim) with the given per-call deadline, and returns every answer. All calls
// hit key "shared", or with ownKeys each call its own key (callKey).
type answer struct {
	res []store.Result
	err error
}

func callKey(caller, i int) string { return "call-" + strconv.Itoa(caller) + "-" + strconv.Itoa(i) }

// during, if not nil, runs beside the callers; done closes when they have
// all finished, and hammer waits for during to return.
func hammer(t *testing.T, s *redisstore.Store, callers, calls int, lim uint64, deadline time.Duration, ownKeys bool, during func(done <-chan struct{})) []answer {
	t.Helper()
	answers := make([]answer, callers*calls)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				key := "shared"
				if ownKeys {
					key = callKey(c, i)
				}
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				res, err := s.Take(ctx, []store.Request{{Key: key, Limit: window(lim), Hits: 1}})
				cancel()
				answers[c*calls+i] = answer{res, err}
			}
		}()
	}
	done, duringDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(duringDone)
		if during != nil {
			during(done)
		}
	}()
	wg.Wait()
	close(done)
	<-duringDone
	return answers
}

// remainingSet checks that the allowed answers saw distinct counter values
// (each decision charged once, none shared) and returns how many there were.
func remainingSet(t *testing.T, answers []answer) int {
	t.Helper()
	seen := map[uint64]bool{}
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		if len(a.res) != 1 || !a.res[0].Allowed {
			t.Fatalf("answer %+v, want one allowed decision", a.res)
		}
		if seen[a.res[0].Remaining] {
			t.Fatalf("two decisions both left remaining %d: a decision was shared or replayed", a.res[0].Remaining)
		}
		seen[a.res[0].Remaining] = true
	}
	return len(seen)
}

func infoStat(t *testing.T, c *redis.Client, section, field string) int {
	t.Helper()
	return redistest.InfoInt(t, c, section, field)
}

// charged reads how many hits "shared" holds, with a check that charges none.
func charged(t *testing.T, s *redisstore.Store, lim uint64) uint64 {
	t.Helper()
	res := mustTake(t, s, []store.Request{{Key: "shared", Limit: window(lim), Hits: 0}})
	return lim - res[0].Remaining
}

// TestPipelineSharesRoundTrips: concurrent callers' scripts reach Redis in
// shared reads (INFO stats total_reads_processed, counted by Redis), their
// takes in shared script calls, every decision is still its own, and a lone
// caller is not delayed by the window.
func TestPipelineSharesRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	clock := storetest.NewClock(storetest.Epoch())
	for _, tc := range pipelineShareCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := admin.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			opts := append([]redisstore.Option{redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithPoolSize(4)}, tc.opts...)
			checkPipelineShares(t, newStore(t, opts...), admin, tc)
		})
	}

	// A lone caller never waits for the window: with a window of a minute,
	// every one of 20 sequential calls is answered within a deadline far
	// shorter (a call that waited would fail with it).
	s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithPipeline(time.Minute, 0))
	failed := 0
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := s.Take(ctx, batch(1, window(pipelineLimit), 1)); err != nil {
			failed++
		}
		cancel()
	}
	if failed > 0 {
		t.Errorf("%d of 20 lone calls with a one-minute window failed their 5 s deadline: a lone call waited for the window", failed)
	}
}

// pipelineLimit is the limit of the pipeline tests' counters: never reached.
const pipelineLimit = 1_000_000

// pipelineShareCase is a pipeline setting and the reads per decision and
// merged scripts TestPipelineSharesRoundTrips expects of it.
type pipelineShareCase struct {
	name          string
	opts          []redisstore.Option
	maxReadsRatio float64 // reads per decision, at most
	minReadsRatio float64 // and at least: no pipeline above the limit
	merges        bool    // whether takes in a pipeline share one script
}

var pipelineShareCases = []pipelineShareCase{
	// Coalescing off: one read and one script per call (and a few
	// reads for the pool).
	{name: "window 0 disables", opts: []redisstore.Option{redisstore.WithPipeline(0, 0)}, maxReadsRatio: 1.1},
	// How many of 32 callers wait together depends on the scheduler:
	// a quiet box reads about once per 4-8 decisions, a starved 2-core
	// CI box once per 2 (0.50 seen); the bound shows that it coalesces.
	{name: "window 2ms", opts: []redisstore.Option{redisstore.WithPipeline(2*time.Millisecond, 0)}, maxReadsRatio: 0.75, merges: true},
	// The limit's own bound is the minimum (never more than 4 calls a
	// read); how close to it a starved 2-core CI box gets varies
	// (0.4 to 0.75 seen), so the maximum only shows that it coalesces.
	{name: "window 2ms limit 4", opts: []redisstore.Option{redisstore.WithPipeline(2*time.Millisecond, 4)}, maxReadsRatio: 0.9, minReadsRatio: 0.25, merges: true},
}

// checkPipelineShares hammers s with 32 callers of 25 calls each on one
// key and checks the decisions, the scripts and the reads Redis counted.
func checkPipelineShares(t *testing.T, s *redisstore.Store, admin *redis.Client, tc pipelineShareCase) {
	const lim = pipelineLimit
	mustTake(t, s, []store.Request{{Key: "warm", Limit: window(lim), Hits: 1}}) // loads the script
	reads0 := infoStat(t, admin, "stats", "total_reads_processed")
	calls0 := scriptRuns(t, admin)

	const callers, calls = 32, 25
	answers := hammer(t, s, callers, calls, lim, 5*time.Second, false, nil)
	for _, a := range answers {
		if a.err != nil {
			t.Fatalf("Take: %v", a.err)
		}
	}
	if n := remainingSet(t, answers); n != callers*calls {
		t.Fatalf("%d distinct decisions, want %d", n, callers*calls)
	}
	scripts := scriptRuns(t, admin) - calls0
	reads := infoStat(t, admin, "stats", "total_reads_processed") - reads0 - 2 // the two INFOs
	switch {
	case !tc.merges && scripts != callers*calls:
		t.Errorf("Redis ran %d scripts for %d calls, want one each", scripts, callers*calls)
	case tc.merges && (scripts >= callers*calls || scripts < int(tc.minReadsRatio*callers*calls)):
		t.Errorf("Redis ran %d scripts for %d calls, want fewer (merged takes), and no more than a pipeline's limit in one",
			scripts, callers*calls)
	}
	if got := charged(t, s, lim); got != callers*calls {
		t.Errorf("counter holds %d hits after %d calls", got, callers*calls)
	}
	ratio := float64(reads) / float64(callers*calls)
	t.Logf("%d decisions in %d script calls and %d reads (%.2f reads per decision)", callers*calls, scripts, reads, ratio)
	if ratio > tc.maxReadsRatio || ratio < tc.minReadsRatio {
		t.Errorf("%.2f reads per decision, want %.2f to %.2f", ratio, tc.minReadsRatio, tc.maxReadsRatio)
	}
}

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

// scriptRuns is how many takes Redis ran, as FCALL or as EVALSHA.
func scriptRuns(t *testing.T, c *redis.Client) int {
	t.Helper()
	st := commandStats(t, c)
	return st["fcall"] + st["evalsha"]
}

// TestPipelineMergesChargedTakes: TakeCharged (a lease's top-up: a request
// and a Spare op on its key) goes through the coalescer as Take does, so
// concurrent TakeCharged and Take calls on one replica reach Redis in fewer
// script calls than calls (INFO commandstats), and every TakeCharged still
// gets its own charge: the hits it asked for, the state it left (distinct
// per call), and Return takes back exactly those.
func TestPipelineMergesChargedTakes(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	clock := storetest.NewClock(storetest.Epoch())
	for _, tc := range []struct {
		name    string
		charged func(caller, i int) bool
	}{
		{"charged only", func(int, int) bool { return true }},
		{"mixed", func(c, i int) bool { return (c+i)%2 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := admin.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			s := newStore(t, redisstore.WithAddr(srv.Addr), redisstore.WithClock(clock.Now), redisstore.WithPoolSize(4),
				redisstore.WithPipeline(2*time.Millisecond, 0))
			mustTake(t, s, []store.Request{{Key: "warm", Limit: window(pipelineLimit), Hits: 1}}) // loads the library
			calls0 := scriptRuns(t, admin)
			replies := chargedCalls(t, s, tc.charged)
			runs := scriptRuns(t, admin) - calls0
			hits, topUps := checkChargedReplies(t, replies, tc.charged)
			t.Logf("%d calls (%d TakeCharged) in %d script calls", len(replies), topUps, runs)
			if runs >= len(replies) {
				t.Errorf("Redis ran %d scripts for %d calls (%d TakeCharged): the charged takes did not merge", runs, len(replies), topUps)
			}
			if got := charged(t, s, pipelineLimit); got != hits {
				t.Fatalf("counter holds %d hits, the calls took %d", got, hits)
			}
			// Each charge is exact: returning them all leaves the
			// plain Takes' hits.
			for _, r := range replies {
				if err := s.Return(t.Context(), r.charges); err != nil {
					t.Fatalf("Return: %v", err)
				}
			}
			if got, want := charged(t, s, pipelineLimit), uint64(len(replies)-topUps); got != want {
				t.Errorf("counter holds %d hits after the charges came back, want %d", got, want)
			}
		})
	}
}

// TestPipelineMergesChargedTakes' load: chargedCallers callers of
// chargedCallsEach calls, a TakeCharged of a hit and a Spare op of
// chargedSpare hits where charged says, a Take of a hit elsewhere.
const chargedCallers, chargedCallsEach, chargedSpare = 32, 25, 3

// chargedReply is one call's answer.
type chargedReply struct {
	res     []store.Result
	charges []store.Charge
	err     error
}

// chargedCalls makes the calls on key "shared" at once; reply c*calls+i is
// caller c's call i.
func chargedCalls(t *testing.T, s *redisstore.Store, charged func(caller, i int) bool) []chargedReply {
	const lim, callers, calls = pipelineLimit, chargedCallers, chargedCallsEach
	replies := make([]chargedReply, callers*calls)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				r := &replies[c*calls+i]
				if charged(c, i) {
					r.res, r.charges, r.err = s.TakeCharged(ctx, []store.Request{
						{Key: "shared", Limit: window(lim), Hits: 1},
						{Key: "shared", Limit: window(lim), Hits: chargedSpare, Mode: algorithms.Spare},
					})
				} else {
					r.res, r.err = s.Take(ctx, []store.Request{{Key: "shared", Limit: window(lim), Hits: 1}})
				}
				cancel()
			}
		})
	}
	wg.Wait()
	return replies
}

// checkChargedReplies requires every call allowed, each leaving its own
// remaining, and each TakeCharged one charge of the key: both ops' hits,
// and the fixed window's count after them, which is what the call's last
// decision left. It returns the hits the calls took and how many were
// TakeCharged.
func checkChargedReplies(t *testing.T, replies []chargedReply, charged func(caller, i int) bool) (hits uint64, topUps int) {
	const lim, spare, calls = pipelineLimit, chargedSpare, chargedCallsEach
	seen := map[uint64]bool{}
	for n, r := range replies {
		c, i := n/calls, n%calls
		if r.err != nil {
			t.Fatalf("caller %d call %d: %v", c, i, r.err)
		}
		last := r.res[len(r.res)-1]
		for _, d := range r.res {
			if !d.Allowed {
				t.Fatalf("caller %d call %d: %+v, want allowed", c, i, r.res)
			}
		}
		if seen[last.Remaining] {
			t.Fatalf("two calls left remaining %d: a decision was shared or replayed", last.Remaining)
		}
		seen[last.Remaining] = true
		if !charged(c, i) {
			hits++
			if r.charges != nil {
				t.Errorf("Take returned charges %+v", r.charges)
			}
			continue
		}
		topUps++
		hits += 1 + spare
		if len(r.charges) != 1 {
			t.Fatalf("caller %d call %d: charges %+v, want one", c, i, r.charges)
		}
		ch := r.charges[0]
		_, count, _ := ch.After.Registers()
		if ch.Key != "shared" || ch.Limit != window(lim) || ch.Applied != 1+spare || uint64(count) != lim-last.Remaining {
			t.Fatalf("caller %d call %d: charge %+v (count %d) for %+v, want %d hits leaving %d", c, i, ch, count, r.res, 1+spare, lim-last.Remaining)
		}
	}
	return hits, topUps
}
