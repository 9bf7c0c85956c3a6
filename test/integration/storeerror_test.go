package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

const storeErrorConfig = `domain: se
descriptors:
  - key: allow
    rate_limit: {unit: day, requests_per_unit: 100, on_store_error: allow}
  - key: deny
    rate_limit: {unit: day, requests_per_unit: 100, on_store_error: deny}
  - key: default
    rate_limit: {unit: day, requests_per_unit: 100}
`

func TestOnStoreErrorWithRedisStopped(t *testing.T) {
	t.Parallel()
	rds := redistest.StartProcess(t) // restarted below
	svc := startWithRedisAt(t, rds.Addr, storeErrorConfig, "REDIS_TIMEOUT=1s")
	cases := []storeErrorCase{
		{"allow alone: OK", []*rlcommon.RateLimitDescriptor{desc("allow", "a")}, codes.OK, ok},
		{"any deny: OVER_LIMIT", []*rlcommon.RateLimitDescriptor{desc("allow", "a"), desc("deny", "d")}, codes.OK, over},
		{"deny beside the default: OVER_LIMIT", []*rlcommon.RateLimitDescriptor{desc("default", "x"), desc("deny", "d")}, codes.OK, over},
		{"allow beside the default: UNAVAILABLE", []*rlcommon.RateLimitDescriptor{desc("allow", "a"), desc("default", "x")}, codes.Unavailable, 0},
		{"the default alone: UNAVAILABLE as before", []*rlcommon.RateLimitDescriptor{desc("default", "x")}, codes.Unavailable, 0},
	}
	for _, c := range cases {
		resp, err := svc.call(request("se", c.descs...))
		if err != nil || resp.GetOverallCode() != ok || resp.GetStatuses()[0].GetCurrentLimit() == nil {
			t.Fatalf("%s with Redis up: %v %v, want OK with a current_limit", c.name, resp, err)
		}
	}

	rds.Stop()
	start := time.Now()
	answered, tried := storeErrorAnswers(t, svc, cases)

	storeErrorJSON(t, svc)
	for _, code := range []rlsv3.RateLimitResponse_Code{ok, over} {
		answered[code]++
		tried[code]++
	}

	metrics := scrape(t, svc)
	if got := metricValue(t, metrics, `ratelimitd_store_error_answers_total{answer="allow"}`); got < float64(answered[ok]) || got > float64(tried[ok]) {
		t.Errorf("store_error_answers_total{allow} = %v, want %d..%d", got, answered[ok], tried[ok])
	}
	if got := metricValue(t, metrics, `ratelimitd_store_error_answers_total{answer="deny"}`); got < float64(answered[over]) || got > float64(tried[over]) {
		t.Errorf("store_error_answers_total{deny} = %v, want %d..%d", got, answered[over], tried[over])
	}
	lines := strings.Count(svc.logs.String(), "answered from on_store_error")
	if maxLines := 1 + int(time.Since(start)/time.Second); lines < 1 || lines > maxLines {
		t.Errorf("%d answers logged %d lines, want 1..%d", answered[ok]+answered[over], lines, maxLines)
	}

	rds.Restart(t)
	testkit.WaitFor(t, 15*time.Second, "counting again after Redis restarts", func() bool {
		resp, err := svc.call(request("se", desc("deny", "d")))
		return err == nil && resp.GetOverallCode() == ok && resp.GetStatuses()[0].GetCurrentLimit() != nil
	})
}

type storeErrorCase struct {
	name  string
	descs []*rlcommon.RateLimitDescriptor
	code  codes.Code // codes.Unavailable also accepts DeadlineExceeded
	want  rlsv3.RateLimitResponse_Code
}

// storeErrorAnswers calls every case with Redis down, with a 20 ms and a
// 200 ms deadline.
func storeErrorAnswers(t *testing.T, svc *service, cases []storeErrorCase) (answered, tried map[rlsv3.RateLimitResponse_Code]int) {
	t.Helper()
	// answered counts the fallback answers the client got; tried, the calls
	// that asked for one (the service may answer one the client no longer
	// waits for).
	answered, tried = map[rlsv3.RateLimitResponse_Code]int{}, map[rlsv3.RateLimitResponse_Code]int{}
	for _, deadline := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		for _, c := range cases {
			// A loaded box can stall the answer past a 20 ms deadline now
			// and then: one of three attempts must make it.
			var resp *rlsv3.RateLimitResponse
			var err error
			var took time.Duration
			got := codes.Unknown
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				t0 := time.Now()
				resp, err = svc.client.ShouldRateLimit(ctx, request("se", c.descs...))
				took = time.Since(t0)
				cancel()
				got = status.Code(err)
				if c.code == codes.Unavailable && got == codes.DeadlineExceeded {
					got = codes.Unavailable
				}
				if c.code == codes.OK {
					tried[c.want]++
				}
				if got == c.code && resp.GetOverallCode() == c.want {
					break
				}
			}
			if got != c.code || resp.GetOverallCode() != c.want {
				t.Errorf("%s, deadline %s: %v %v after %s, want %v %v", c.name, deadline, resp.GetOverallCode(), err, took, c.want, c.code)
				continue
			}
			t.Logf("%s, deadline %s: %v %v after %s", c.name, deadline, resp.GetOverallCode(), got, took)
			if c.code == codes.OK {
				answered[c.want]++
				if resp.GetStatuses()[0].GetCurrentLimit() != nil {
					t.Errorf("%s: current_limit %v, but nothing was counted", c.name, resp.GetStatuses()[0].GetCurrentLimit())
				}
			}
		}
	}
	return answered, tried
}

// storeErrorJSON: /json answers the same, with HTTP's codes.
func storeErrorJSON(t *testing.T, svc *service) {
	t.Helper()
	// Without a caller deadline REDIS_TIMEOUT bounds the wait.
	for body, want := range map[string]int{
		`{"domain":"se","descriptors":[{"entries":[{"key":"allow","value":"a"}]}]}`:   http.StatusOK,
		`{"domain":"se","descriptors":[{"entries":[{"key":"deny","value":"d"}]}]}`:    http.StatusTooManyRequests,
		`{"domain":"se","descriptors":[{"entries":[{"key":"default","value":"x"}]}]}`: http.StatusServiceUnavailable,
	} {
		resp, err := http.Post("http://"+svc.httpAddr+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/json %s: %d, want %d", body, resp.StatusCode, want)
		}
	}
}
