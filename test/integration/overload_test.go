package integration

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// inFlight is ratelimitd_requests_in_flight on the debug port.
func inFlight(t *testing.T, svc *service) int {
	t.Helper()
	return int(metricValue(t, scrape(t, svc), "ratelimitd_requests_in_flight"))
}

// stallCalls starts n calls on svc's connection, which hang while Redis is
// frozen; wait returns their codes once they end.
func stallCalls(svc *service, n int, timeout time.Duration) (wait func() map[codes.Code]int) {
	var mu sync.Mutex
	got := map[codes.Code]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, err := svc.client.ShouldRateLimit(ctx, request("it", desc("generic_key", "shared"), desc("user", "u"+strconv.Itoa(i))))
			mu.Lock()
			got[status.Code(err)]++
			mu.Unlock()
		})
	}
	return func() map[codes.Code]int { wg.Wait(); return got }
}

// TestOverloadAdmission: with Redis stalled, MAX_CONCURRENT_REQUESTS refuses
// the calls past it at once (RESOURCE_EXHAUSTED, counted), the ones in
// progress end normally once Redis answers, and REQUEST_TIMEOUT answers a
// call Redis does not UNAVAILABLE before REDIS_TIMEOUT or the caller's
// deadline would.
func TestOverloadAdmission(t *testing.T) {
	t.Parallel()
	rds := redistest.StartProcess(t)
	svc := startWithRedisAt(t, rds.Addr, itConfig, "MAX_CONCURRENT_REQUESTS=3", "REDIS_TIMEOUT=30s")
	if _, err := svc.call(request("it", desc("generic_key", "shared"))); err != nil {
		t.Fatal(err)
	}
	thaw := rds.Freeze(t)
	wait := stallCalls(svc, 3, time.Minute)
	testkit.WaitFor(t, 10*time.Second, "three calls in progress", func() bool { return inFlight(t, svc) == 3 })
	for range 20 {
		if _, err := svc.call(request("it", desc("generic_key", "shared"))); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("past MAX_CONCURRENT_REQUESTS: %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	if got := metricValue(t, scrape(t, svc), "ratelimitd_requests_overloaded_total"); got != 20 {
		t.Errorf("ratelimitd_requests_overloaded_total %v, want 20", got)
	}
	thaw()
	if got := wait(); got[codes.OK] != 3 {
		t.Fatalf("the calls in progress once Redis answered: %v, want 3 OK", got)
	}
	resp, err := svc.call(request("it", withHits(desc("generic_key", "shared"), 0)))
	if err != nil || resp.GetStatuses()[0].GetLimitRemaining() != 100-4 {
		t.Fatalf("after the stall: %v %v, want 96 left: the refused calls charged nothing", resp, err)
	}

	t.Run("REQUEST_TIMEOUT", func(t *testing.T) {
		rds := redistest.StartProcess(t)
		const timeout = 300 * time.Millisecond
		svc := startWithRedisAt(t, rds.Addr, itConfig, "REQUEST_TIMEOUT="+timeout.String(), "REDIS_TIMEOUT=30s")
		if _, err := svc.call(request("it", desc("generic_key", "shared"))); err != nil {
			t.Fatal(err)
		}
		rds.Freeze(t)
		wait := stallCalls(svc, 1, time.Minute)
		done := make(chan map[codes.Code]int, 1)
		go func() { done <- wait() }()
		select {
		case got := <-done:
			if got[codes.Unavailable] != 1 {
				t.Fatalf("REQUEST_TIMEOUT: %v, want UNAVAILABLE", got)
			}
		case <-time.After(timeout + testkit.Slack):
			t.Fatal("the call outlived REQUEST_TIMEOUT (REDIS_TIMEOUT 30s, the caller's deadline a minute)")
		}
		if got := metricValue(t, scrape(t, svc), "ratelimitd_request_timeouts_total"); got != 1 {
			t.Errorf("ratelimitd_request_timeouts_total %v, want 1", got)
		}
	})
}

// TestGRPCMaxConcurrentStreams: one connection carries at most
// GRPC_MAX_CONCURRENT_STREAMS calls at once (the rest wait in the client, as
// Envoy would open another connection); 0 is gRPC's own bound, none, as in
// envoyproxy.
func TestGRPCMaxConcurrentStreams(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		setting   string
		calls     int
		wantAtMax int
	}{
		{setting: "GRPC_MAX_CONCURRENT_STREAMS=8", calls: 20, wantAtMax: 8},
		{setting: "GRPC_MAX_CONCURRENT_STREAMS=0", calls: 300, wantAtMax: 300},
	} {
		t.Run(tt.setting, func(t *testing.T) {
			rds := redistest.StartProcess(t)
			svc := startWithRedisAt(t, rds.Addr, itConfig, tt.setting, "REDIS_TIMEOUT=30s")
			if _, err := svc.call(request("it", desc("generic_key", "shared"))); err != nil {
				t.Fatal(err)
			}
			thaw := rds.Freeze(t)
			wait := stallCalls(svc, tt.calls, time.Minute)
			testkit.WaitFor(t, 20*time.Second, "the connection's streams in progress", func() bool { return inFlight(t, svc) == tt.wantAtMax })
			// A call on another connection is taken in, while the calls
			// held back on the first, sent before it, still are not.
			other, err := grpc.NewClient(svc.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = rlsv3.NewRateLimitServiceClient(other).ShouldRateLimit(ctx, request("it", desc("generic_key", "shared")))
			}()
			testkit.WaitFor(t, 20*time.Second, "the other connection's call in progress", func() bool { return inFlight(t, svc) == tt.wantAtMax+1 })
			if n := inFlight(t, svc); n != tt.wantAtMax+1 {
				t.Fatalf("%d calls in progress, want %d", n, tt.wantAtMax+1)
			}
			thaw()
			if got := wait(); got[codes.OK] != tt.calls {
				t.Fatalf("once Redis answered: %v, want %d OK", got, tt.calls)
			}
		})
	}
}
