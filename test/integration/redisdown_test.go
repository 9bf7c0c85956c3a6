package integration

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// answer is one call made while Redis was down.
type answer struct {
	at   time.Duration // since Redis stopped
	code codes.Code
}

// With Redis stopped, once the breaker has opened, 20 concurrent callers
// (and the delay queue's) are refused at once, UNAVAILABLE, without
// reaching for Redis; each breaker logs its opening and closing once, and
// every call is answered again after a restart. It counts calls and lines,
// never times them (docs/redis.md has the measured figures).
func TestRedisDownFailsFast(t *testing.T) {
	t.Parallel()
	const callers = 20
	rds := redistest.StartProcess(t) // restarted below
	svc := startWithRedisAt(t, rds.Addr, itConfig, "REDIS_TIMEOUT=10s", "QUEUE_ENABLED=true")
	if _, err := svc.call(request("it", desc("global", "before"))); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	rds.Stop()
	before := scrape(t, svc)
	answers := callWhileDown(svc, callers, 20*time.Millisecond, time.Second)
	after := scrape(t, svc)

	codesSeen := map[codes.Code]int{}
	for _, a := range answers {
		if a.code == codes.OK {
			t.Fatalf("a call %s after Redis stopped was answered OK", a.at)
		}
		codesSeen[a.code]++
	}
	refused := seriesDelta(t, before, after, `ratelimitd_redis_breaker_refused_total{client="limiter",node="`+rds.Addr+`"}`)
	late := seriesDelta(t, before, after, `ratelimitd_backend_errors_total{kind="deadline"}`)
	t.Logf("Redis down, %d callers with 20 ms deadlines for 1 s: %d calls, codes %v; the breaker refused %.0f, the service answered %.0f at the deadline",
		callers, len(answers), codesSeen, refused, late)
	// A call the breaker refused never waited for Redis. The service's
	// other UNAVAILABLE answers are the calls in flight when it opened and
	// those that opened it, and the calls merged into a refused script call
	// (pipelining merges a slot's takes; one refusal answers them all: a
	// tenth is far more than runs see). A caller's own DEADLINE_EXCEEDED
	// can come from a starved client as well as from the service, so only
	// the service's count of answers at the deadline is bounded.
	unavailable := float64(codesSeen[codes.Unavailable])
	if notRefused := unavailable - refused; notRefused > callers+3+unavailable/10 || refused == 0 {
		t.Errorf("the breaker refused %.0f calls; %.0f more were answered UNAVAILABLE, want at most the %d in flight when it opened, the 3 that opened it and a tenth merged",
			refused, notRefused, callers)
	}
	if late > callers {
		t.Errorf("the service answered %.0f calls at their deadline, want at most the %d in flight when the breaker opened", late, callers)
	}
	checkDownElsewhere(t, svc, rds.Addr)

	rds.Restart(t)
	restarted := time.Now()
	testkit.WaitFor(t, 5*time.Second, "an OK answer after Redis restarted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		resp, err := svc.client.ShouldRateLimit(ctx, request("it", desc("global", "after")))
		return err == nil && resp.GetOverallCode() == ok
	})
	t.Logf("OK again %s after Redis was back", time.Since(restarted))
	q := queuev1.NewDelayQueueClient(svc.conn)
	testkit.WaitForNil(t, 5*time.Second, "the queue to answer after Redis restarted", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := q.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "back"})
		return err
	})
	for _, client := range []string{"limiter", "queue"} {
		testkit.WaitFor(t, 5*time.Second, "the "+client+" breaker to log its closing", func() bool {
			return breakerLines(svc.logs.String(), client, "closed") > 0
		})
		for _, change := range []string{"open", "closed"} {
			if n := breakerLines(svc.logs.String(), client, change); n != 1 {
				t.Errorf("%d log lines of the %s breaker %s, want one per change", n, client, change)
			}
		}
	}
}

// breakerLines counts the log lines (LOG_FORMAT=json) telling that the
// client's breaker opened or closed.
func breakerLines(logs, client, change string) int {
	n := 0
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `"client":"`+client+`"`) && strings.Contains(line, "circuit breaker "+change) {
			n++
		}
	}
	return n
}

// seriesDelta is how much one series (name with its labels) of the
// service's metrics grew between two scrapes; a series not yet there is 0.
func seriesDelta(t *testing.T, before, after, series string) float64 {
	t.Helper()
	value := func(body string) float64 {
		for line := range strings.SplitSeq(body, "\n") {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				v, err := strconv.ParseFloat(rest, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return v
			}
		}
		return 0
	}
	return value(after) - value(before)
}

// callWhileDown runs callers concurrent loops of calls with deadline for
// span and returns every answer.
func callWhileDown(svc *service, callers int, deadline, span time.Duration) []answer {
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for time.Since(start) < span {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				t0 := time.Now()
				_, err := svc.client.ShouldRateLimit(ctx, request("it", desc("global", "during")))
				a := answer{at: t0.Sub(start), code: status.Code(err)}
				cancel()
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	return answers
}

// checkDownElsewhere: with the breaker open, /json answers 503 (not after
// REDIS_TIMEOUT, 10 s), and the queue's client has a breaker of its own:
// after the calls that open it, it refuses every Enqueue, answered
// UNAVAILABLE. The metrics show both clients' breakers open.
func checkDownElsewhere(t *testing.T, svc *service, redisAddr string) {
	t.Helper()
	start := time.Now()
	resp, err := http.Post("http://"+svc.httpAddr+"/json", "application/json",
		strings.NewReader(`{"domain":"it","descriptors":[{"entries":[{"key":"global","value":"json"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusServiceUnavailable || took > 5*time.Second {
		t.Errorf("POST /json with Redis down: %d after %s, want 503 before REDIS_TIMEOUT", resp.StatusCode, took)
	}
	q := queuev1.NewDelayQueueClient(svc.conn)
	const enqueues = 10
	before := scrape(t, svc)
	unavailable := 0
	for range enqueues {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := q.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "down"})
		cancel()
		if status.Code(err) == codes.Unavailable {
			unavailable++
		}
	}
	body := scrape(t, svc)
	refused := seriesDelta(t, before, body, `ratelimitd_redis_breaker_refused_total{client="queue",node="`+redisAddr+`"}`)
	// The first calls open the breaker (3 failures, the default
	// REDIS_BREAKER_THRESHOLD); every later one is refused.
	if unavailable < enqueues-3 || refused < enqueues-3 {
		t.Errorf("queue Enqueue with Redis down: %d of %d UNAVAILABLE, %.0f refused by the queue client's breaker; want all but the 3 that open it",
			unavailable, enqueues, refused)
	}
	for _, want := range []string{`ratelimitd_redis_breaker_open{client="limiter",node="127.0.0.1:`, `ratelimitd_redis_breaker_open{client="queue",node="127.0.0.1:`} {
		i := strings.Index(body, want)
		if i < 0 || !strings.HasPrefix(body[i+strings.IndexByte(body[i:], '}'):], "} 1\n") {
			t.Errorf("/metrics lacks %s...} 1", want)
		}
	}
}
