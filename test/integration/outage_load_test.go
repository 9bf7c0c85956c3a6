package integration

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// outageConfig's one rule has no on_store_error: ON_STORE_ERROR=local
// makes it local. Its window is an hour, so one window holds a whole run.
const outageConfig = `domain: outage
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: %d}
`

// outageEnv is every replica's: the rule local by default, three
// replicas assumed before they see each other (they do at once), and
// beats often enough that they see each other within a second.
var outageEnv = []string{"ON_STORE_ERROR=local", "LOCAL_FALLBACK_REPLICAS=3", "LOCAL_FALLBACK_HEARTBEAT=250ms", "LOG_FORMAT=json"}

// Load: callersPerReplica callers on each replica (even load), each
// sending a request every pace with a deadline generous enough for a
// loaded box (a failed call is what the tests count): a call gets
// outageRedisTimeout from Redis, then the rest to be answered locally. With
// 1 s and 2 s, calls on a loaded box (load 8-28) missed their deadline and
// healthy Redis calls timed out, the rule flapping. A Redis killed refuses
// connections at once, so neither figure delays the outage.
const (
	callersPerReplica  = 3
	pace               = 10 * time.Millisecond
	outageRedisTimeout = 3 * time.Second
	callDeadline       = 10 * time.Second
)

// outageLoad is the same load on every replica, counted.
type outageLoad struct {
	admitted, denied, failed atomic.Int64
	firstErr                 atomic.Value
	stop                     atomic.Bool
	wg                       sync.WaitGroup
	start                    time.Time
}

// startLoad sends req to every replica from callersPerReplica callers each.
func startLoad(svcs []*service, req *rlsv3.RateLimitRequest) *outageLoad {
	l := &outageLoad{start: time.Now()}
	for _, svc := range svcs {
		for range callersPerReplica {
			l.wg.Go(func() {
				for !l.stop.Load() {
					ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
					resp, err := svc.client.ShouldRateLimit(ctx, req)
					cancel()
					switch {
					case err != nil:
						l.failed.Add(1)
						l.firstErr.CompareAndSwap(nil, err.Error())
					case resp.GetOverallCode() == ok:
						l.admitted.Add(1)
					default:
						l.denied.Add(1)
					}
					time.Sleep(pace)
				}
			})
		}
	}
	return l
}

// waitReplicaCaughtUp waits until replica has every write master had
// taken when it was called. A killed master loses the writes it had not
// sent yet (docs/redis.md), hits the service cannot know of: on a loaded
// box (load 20) that lag alone once took a Sentinel failover to 1.14 x the
// limit. Only the hits of the moments between this and the kill remain at
// stake, as on a replica that keeps up.
func waitReplicaCaughtUp(t *testing.T, master, replica *redis.Client) {
	t.Helper()
	taken := redistest.InfoInt(t, master, "replication", "master_repl_offset")
	testkit.WaitFor(t, 10*time.Second, "the replica to catch up with its master", func() bool {
		return redistest.InfoInt(t, replica, "replication", "slave_repl_offset") >= taken
	})
}

// waitAdmitted waits until the load has n admissions: a master killed
// then leaves most of the limit to decide locally, where a fixed wait let a
// fast box fill the window first, and every local decision deny.
func (l *outageLoad) waitAdmitted(t *testing.T, n int64) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, "the load's first admissions", func() bool { return l.admitted.Load() >= n })
}

// waitBackOnStore waits until every replica has logged the rule back on
// the store (a store decision after a quiet spell without a local one) and
// Redis has then denied each caller again (the window full): conditions,
// not a span the load may not fill on a loaded box.
func (l *outageLoad) waitBackOnStore(t *testing.T, svcs []*service) {
	t.Helper()
	testkit.WaitFor(t, time.Minute, "every replica to log the rule back on the store", func() bool {
		for _, svc := range svcs {
			if !strings.Contains(svc.logs.String(), "rule back on the store") {
				return false
			}
		}
		return true
	})
	from := l.denied.Load()
	testkit.WaitFor(t, time.Minute, "Redis to deny again, the window full", func() bool {
		return l.denied.Load() > from+int64(len(svcs)*callersPerReplica)
	})
}

func (l *outageLoad) finish() time.Duration {
	l.stop.Store(true)
	l.wg.Wait()
	return time.Since(l.start)
}

// localGauge is one replica's ratelimitd_local_<name> gauge.
func localGauge(t *testing.T, svc *service, name string) float64 {
	return metricValue(t, scrape(t, svc), "ratelimitd_local_"+name)
}

// waitShares waits until every replica has seen all of them.
func waitShares(t *testing.T, svcs []*service) {
	t.Helper()
	// A rule is local from the config on, so the replicas beat from the
	// start; a local decision, below, makes no difference.
	testkit.WaitFor(t, 10*time.Second, "every replica to see the others", func() bool {
		for _, svc := range svcs {
			if localGauge(t, svc, "replicas") != float64(len(svcs)) {
				return false
			}
		}
		return true
	})
}

// waitReconciled waits until no replica decides a counter locally.
func waitReconciled(t *testing.T, svcs []*service, within time.Duration) {
	t.Helper()
	testkit.WaitFor(t, within, "every replica to charge Redis with its local hits", func() bool {
		for _, svc := range svcs {
			if localGauge(t, svc, "keys") != 0 {
				return false
			}
		}
		return true
	})
}

// sumSeries adds one series over the replicas.
func sumSeries(t *testing.T, svcs []*service, series string) float64 {
	t.Helper()
	sum := 0.0
	for _, svc := range svcs {
		body := scrape(t, svc)
		if strings.Contains(body, series+" ") {
			sum += metricValue(t, body, series)
		}
	}
	return sum
}

// judgeOutage: no failed call, and the window admitted at most 1.1 x the
// limit (the limit bound: every replica decided with its share of what
// Redis last told it was left). It logs the figures and the load.
func judgeOutage(t *testing.T, svcs []*service, l *outageLoad, took time.Duration, limit int, value, what string) {
	t.Helper()
	admitted, denied, failed := l.admitted.Load(), l.denied.Load(), l.failed.Load()
	calls := admitted + denied + failed
	local := sumSeries(t, svcs, `ratelimitd_local_decisions_total{domain="outage",rule="outage.k"}`)
	reconciled := sumSeries(t, svcs, `ratelimitd_local_reconciled_hits_total{domain="outage",rule="outage.k"}`)
	dropped := sumSeries(t, svcs, `ratelimitd_local_dropped_hits_total{domain="outage",rule="outage.k"}`)
	t.Logf("%s: %d calls in %s (%.0f/s, %d replicas x %d callers every %s), %d admitted of a limit of %d (%.3f x), %d denied, %d failed; %.0f decided locally, %.0f hits reconciled, %.0f dropped",
		what, calls, took.Round(time.Millisecond), float64(calls)/took.Seconds(), len(svcs), callersPerReplica, pace,
		admitted, limit, float64(admitted)/float64(limit), denied, failed, local, reconciled, dropped)
	if failed > 0 {
		t.Errorf("%d calls failed (first: %v), want 0", failed, l.firstErr.Load())
	}
	if float64(admitted) > 1.1*float64(limit) {
		t.Errorf("admitted %d in the window, more than 1.1 x the limit of %d", admitted, limit)
	}
	for i, svc := range svcs {
		// One line when the rule went local and one when it came back,
		// not one per request (two of each if Redis flapped).
		logs := svc.logs.String()
		went, back := strings.Count(logs, "rule deciding locally"), strings.Count(logs, "rule back on the store")
		if went < 1 || went > 2 || back < 1 || back > 2 {
			t.Errorf("replica %d logged the rule going local %d times and coming back %d times, want once or twice each", i, went, back)
		}
	}
	if denied == 0 || local == 0 || reconciled == 0 {
		t.Errorf("%d denied, %.0f decided locally, %.0f reconciled: the load never met the limit locally, so the run shows nothing", denied, local, reconciled)
	}
	// Redis holds what was admitted since the window began, within the
	// calls in flight when it failed (their charge lost with the node, or
	// answered locally too).
	resp, err := svcs[0].call(request("outage", withHits(desc("k", value), 0)))
	if err != nil {
		t.Fatal(err)
	}
	held := int64(limit) - int64(resp.GetStatuses()[0].GetLimitRemaining())
	t.Logf("%s: Redis holds %d hits of the window after reconciling", what, held)
	if slack := int64(len(svcs) * callersPerReplica); held < min(admitted, int64(limit))-slack-int64(dropped) {
		t.Errorf("Redis holds %d hits, fewer than the %d admitted (less %d in flight and %.0f dropped)", held, admitted, slack, dropped)
	}
}
