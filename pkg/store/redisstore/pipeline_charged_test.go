package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

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
		count := algorithms.ViewOf[algorithms.Window](ch.After).Count
		if ch.Key != "shared" || ch.Limit != window(lim) || ch.Applied != 1+spare || uint64(count) != lim-last.Remaining {
			t.Fatalf("caller %d call %d: charge %+v (count %d) for %+v, want %d hits leaving %d", c, i, ch, count, r.res, 1+spare, lim-last.Remaining)
		}
	}
	return hits, topUps
}
