package integration

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// crossSlotDeadline is a racing call's deadline, REDIS_TIMEOUT well within
// it: the test counts charges, not time, and on a loaded box (load 8-28)
// calls with a 5 s deadline and a 2 s REDIS_TIMEOUT timed out.
const crossSlotDeadline = 30 * time.Second

// undoFailures is the series counting denied cross-slot requests whose undo
// failed (their charges stay).
const undoFailures = "ratelimitd_redis_undo_failures_total"

// Three replicas of the binary x 100 clients sending requests whose three
// counters live on three masters: at most the limit is admitted (each
// denied request's charges are undone), and once the racing stops, exactly
// the limit: no undo leaks a hit, none leaves extra room. A call that
// timed out, or a denial whose undo failed (counted by undoFailures), may
// have left its charges: each is one hit of slack on every counter, and
// the only slack.
func TestClusterCrossSlotConcurrency(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartCluster(t, 3)
	masters := redistest.Clients(t, nodes)
	root, _ := newConfigRoot(t, map[string]string{"scale.yaml": scaleConfig})
	env := []string{"REDIS_TYPE=CLUSTER", "REDIS_URL=" + redistest.Addrs(nodes), "REDIS_TIMEOUT=10s"}
	svcs := []*service{startService(t, root, env...), startService(t, root, env...), startService(t, root, env...)}
	const limit = 40
	for _, tt := range []struct{ key, alg string }{{"fw", "fixed_window"}, {"tb", "token_bucket"}} {
		t.Run(tt.alg, func(t *testing.T) {
			vals := []string{valueOn(t, masters, 0, "x", scaleKeyOf(tt.key, tt.alg)), valueOn(t, masters, 1, "y", scaleKeyOf(tt.key, tt.alg)), valueOn(t, masters, 2, "z", scaleKeyOf(tt.key, tt.alg))}
			req := request("scale", desc(tt.key, vals[0]), desc(tt.key, vals[1]), desc(tt.key, vals[2]))
			undoneBefore := sumSeries(t, svcs, undoFailures)
			race := raceCrossSlot(svcs, req)
			slack := race.uncertain + int64(sumSeries(t, svcs, undoFailures)-undoneBefore)
			var charged []int64
			for _, v := range vals {
				charged = append(charged, limit-int64(remaining(t, svcs[0], tt.key, v)))
			}
			t.Logf("%s: 600 racing requests from 3 binaries x 100 clients: %d admitted, %d denied, %d uncertain (timed out), %d failed; %d hits of slack; counters charged %v",
				tt.alg, race.admitted, race.denied, race.uncertain, race.failed, slack, charged)
			if race.failed > 0 {
				t.Errorf("%d calls failed other than by a timeout, first: %v", race.failed, race.firstErr.Load())
			}
			if race.admitted > limit {
				t.Fatalf("%d admitted over a limit of %d", race.admitted, limit)
			}
			if race.admitted == 0 || race.denied == 0 {
				t.Fatalf("%d admitted, %d denied: the race never met the limit, so it shows nothing", race.admitted, race.denied)
			}
			for i, n := range charged {
				if n < race.admitted || n > race.admitted+slack {
					t.Errorf("counter %d charged %d for %d admitted requests, want %d..%d", i, n, race.admitted, race.admitted, race.admitted+slack)
				}
			}
			// Alone, the remaining room is exactly what the race left.
			more := int64(0)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), crossSlotDeadline)
				resp, err := svcs[1].client.ShouldRateLimit(ctx, req)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetOverallCode() != ok {
					break
				}
				more++
			}
			if total := race.admitted + more; total > limit || total < limit-slack {
				t.Errorf("%d admitted racing + %d alone = %d, want %d (less at most %d of slack)", race.admitted, more, total, limit, slack)
			}
		})
	}
}

// crossSlotRace is what the racing calls were answered.
type crossSlotRace struct {
	admitted, denied, uncertain, failed int64
	firstErr                            atomic.Value
}

// raceCrossSlot sends req twice from each of 100 clients per replica, all
// at once.
func raceCrossSlot(svcs []*service, req *rlsv3.RateLimitRequest) *crossSlotRace {
	var admitted, denied, uncertain, failed atomic.Int64
	race := &crossSlotRace{}
	var wg sync.WaitGroup
	for c := range 300 {
		svc := svcs[c%3]
		wg.Go(func() {
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), crossSlotDeadline)
				resp, err := svc.client.ShouldRateLimit(ctx, req)
				cancel()
				switch {
				case err != nil && timedOut(err):
					uncertain.Add(1)
				case err != nil:
					failed.Add(1)
					race.firstErr.CompareAndSwap(nil, err.Error())
				case resp.GetOverallCode() == ok:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	race.admitted, race.denied, race.uncertain, race.failed = admitted.Load(), denied.Load(), uncertain.Load(), failed.Load()
	return race
}

// timedOut: the call's deadline or REDIS_TIMEOUT passed, perhaps after its
// script ran, so it may have charged (the service answers UNAVAILABLE and
// never retries it).
func timedOut(err error) bool {
	switch st, _ := status.FromError(err); st.Code() {
	case codes.DeadlineExceeded:
		return true
	case codes.Unavailable:
		return strings.Contains(st.Message(), "timeout") || strings.Contains(st.Message(), "deadline")
	}
	return false
}
