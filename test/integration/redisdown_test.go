package integration

import (
	"context"
	"net/http"
	"slices"
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
// callers get UNAVAILABLE at once, never DEADLINE_EXCEEDED; the delay
// queue's calls too. Redis restarted, decisions are back within 500 ms.
func TestRedisDownFailsFast(t *testing.T) {
	svc, rds := startWithRedis(t, itConfig, "REDIS_TIMEOUT=10s", "QUEUE_ENABLED=true")
	if _, err := svc.call(request("it", desc("global", "before"))); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	rds.Stop()
	answers := callWhileDown(svc, 20, 20*time.Millisecond, time.Second)

	var unavailable []time.Duration
	late := 0
	for _, a := range answers {
		switch {
		case a.code == codes.OK:
			t.Fatalf("a call %s after Redis stopped was answered OK", a.at)
		case a.at < 100*time.Millisecond:
		case a.code == codes.Unavailable:
			unavailable = append(unavailable, a.took)
		default:
			late++
		}
	}
	slices.Sort(unavailable)
	if len(unavailable) == 0 {
		t.Fatal("no UNAVAILABLE answer after the first 100 ms")
	}
	p50, p99 := unavailable[len(unavailable)/2], unavailable[len(unavailable)*99/100]
	t.Logf("Redis down, 20 callers with 20 ms deadlines, after the first 100 ms: %d UNAVAILABLE (p50 %s, p99 %s), %d other codes",
		len(unavailable), p50, p99, late)
	// The property is that answers do not wait for the deadline; 10 ms
	// leaves room for a loaded 2-core CI machine.
	if late > 0 || p99 > 10*time.Millisecond {
		t.Errorf("after the first 100 ms: %d answers not UNAVAILABLE and p99 %s; want none and p99 under 10 ms", late, p99)
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
