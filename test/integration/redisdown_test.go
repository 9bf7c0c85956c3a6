package integration

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	queuev1 "github.com/ratelimitd/ratelimitd/api/queue/v1"
)

// answer is one call made while Redis was down.
type answer struct {
	at, took time.Duration // since Redis stopped; how long the call took
	code     codes.Code
}

// With Redis stopped, Envoy's 20 ms deadline is not spent waiting for it:
// once the breaker has opened (well within the first 100 ms), 20 concurrent
// callers get UNAVAILABLE at once, not DEADLINE_EXCEEDED; the delay queue's
// calls too. Redis restarted, decisions are back within 500 ms.
//
// Latency is asserted where the service measures it (its own histogram and
// its count of answers that met the deadline), generously: on a shared
// 2-core box the test's own goroutines can be starved for longer than the
// deadline. Without the breaker the median answer took 16 ms.
func TestRedisDownFailsFast(t *testing.T) {
	svc, rds := startWithRedis(t, itConfig, "REDIS_TIMEOUT=10s", "QUEUE_ENABLED=true")
	if _, err := svc.call(request("it", desc("global", "before"))); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	rds.Stop()
	warm := make(chan string, 1)
	time.AfterFunc(100*time.Millisecond, func() { warm <- scrape(t, svc) })
	answers := callWhileDown(svc, 20, 20*time.Millisecond, time.Second)
	before, after := <-warm, scrape(t, svc)

	var unavailable []time.Duration
	var others []answer
	for _, a := range answers {
		switch {
		case a.code == codes.OK:
			t.Fatalf("a call %s after Redis stopped was answered OK", a.at)
		case a.at < 100*time.Millisecond:
		case a.code == codes.Unavailable:
			unavailable = append(unavailable, a.took)
		default:
			others = append(others, a)
		}
	}
	slices.Sort(unavailable)
	if len(unavailable) == 0 {
		t.Fatal("no UNAVAILABLE answer after the first 100 ms")
	}
	p50, p99 := unavailable[len(unavailable)/2], unavailable[len(unavailable)*99/100]
	served := seriesDelta(t, before, after, `ratelimitd_should_rate_limit_duration_seconds_count{code="Unavailable"}`)
	fast := seriesDelta(t, before, after, `ratelimitd_should_rate_limit_duration_seconds_bucket{code="Unavailable",le="0.0048828125"}`)
	within2ms := seriesDelta(t, before, after, `ratelimitd_should_rate_limit_duration_seconds_bucket{code="Unavailable",le="0.001953125"}`)
	late := seriesDelta(t, before, after, `ratelimitd_backend_errors_total{kind="deadline"}`)
	if served == 0 {
		// seriesDelta reads a missing series as 0, which would pass every
		// bound below: a renamed histogram must fail here instead.
		t.Fatal("no Unavailable answers in ratelimitd_should_rate_limit_duration_seconds")
	}
	t.Logf("Redis down, 20 callers with 20 ms deadlines, after the first 100 ms: caller saw %d UNAVAILABLE (p50 %s, p99 %s) and %d other codes %v; "+
		"the service answered %.0f UNAVAILABLE, %.0f within 2 ms, %.0f within 4.9 ms, and %.0f DEADLINE_EXCEEDED",
		len(unavailable), p50, p99, len(others), others[:min(len(others), 3)], served, within2ms, fast, late)
	if p50 > 5*time.Millisecond || fast < 0.99*served || late > 0.005*served || len(others) > len(answers)/100 {
		t.Errorf("with Redis down the answers wait: want caller p50 under 5 ms (got %s), 99%% of the service's answers within 4.9 ms (%.0f of %.0f), "+
			"at most 0.5%% answered DEADLINE_EXCEEDED by the service (%.0f) and 1%% not UNAVAILABLE at the caller (%d)", p50, fast, served, late, len(others))
	}
	checkDownElsewhere(t, svc)

	rds.Restart(t)
	restarted := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		resp, err := svc.client.ShouldRateLimit(ctx, request("it", desc("global", "after")))
		cancel()
		if err == nil && resp.GetOverallCode() == ok {
			break
		}
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("not answering 5 s after Redis restarted: %v %v", resp, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	recovered := time.Since(restarted)
	t.Logf("OK again %s after Redis was back", recovered)
	if recovered > 500*time.Millisecond {
		t.Errorf("OK again %s after Redis was back, want within 500 ms", recovered)
	}
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
				a := answer{at: t0.Sub(start), took: time.Since(t0), code: status.Code(err)}
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

// checkDownElsewhere: with the breaker open, /json answers 503 at once
// (it waited REDIS_TIMEOUT before), the queue's calls fail fast too, and
// the metrics show both clients' breakers open.
func checkDownElsewhere(t *testing.T, svc *service) {
	t.Helper()
	start := time.Now()
	resp, err := http.Post("http://"+svc.httpAddr+"/json", "application/json",
		strings.NewReader(`{"domain":"it","descriptors":[{"entries":[{"key":"global","value":"json"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusServiceUnavailable || took > time.Second {
		t.Errorf("POST /json with Redis down: %d after %s, want 503 at once", resp.StatusCode, took)
	}
	q := queuev1.NewDelayQueueClient(svc.conn)
	var code codes.Code
	var took time.Duration
	for range 10 { // the first calls open the queue client's breaker
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		t0 := time.Now()
		_, err := q.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: "down"})
		code, took = status.Code(err), time.Since(t0)
		cancel()
	}
	if code != codes.Unavailable || took > 10*time.Millisecond {
		t.Errorf("queue Enqueue with Redis down: %v after %s, want UNAVAILABLE at once", code, took)
	}
	body := scrape(t, svc)
	for _, want := range []string{`ratelimitd_redis_breaker_open{client="limiter",node="127.0.0.1:`, `ratelimitd_redis_breaker_open{client="queue",node="127.0.0.1:`} {
		i := strings.Index(body, want)
		if i < 0 || !strings.HasPrefix(body[i+strings.IndexByte(body[i:], '}'):], "} 1\n") {
			t.Errorf("/metrics lacks %s...} 1", want)
		}
	}
	if !strings.Contains(body, `ratelimitd_redis_breaker_refused_total{client="limiter"`) {
		t.Error("/metrics lacks ratelimitd_redis_breaker_refused_total")
	}
}
