package ratelimit_test

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// localStore is the fallback decorator over st, sharing limits by two, on
// clock, with no loop: the test reconciles.
func localStore(t *testing.T, st store.Store, clock *fakeclock.Clock) *fallback.Store {
	t.Helper()
	fb := fallback.New(st, fallback.WithReplicas(2), fallback.WithClock(clock.Now), fallback.WithInterval(0),
		fallback.WithUncharged(redisstore.NotRun))
	t.Cleanup(func() { _ = fb.Close() })
	return fb
}

// With Redis down, a request of on_store_error: local rules is answered as
// usual from this replica's share (codes, limit, remaining, reset); beside
// allow and deny rules it is decided all-or-nothing with what they say
// (their statuses a code alone, as when they answer a request by
// themselves); beside a rule left unavailable it is UNAVAILABLE unless
// something denies it. The counters API never answers from a local share.
func TestOnStoreErrorLocal(t *testing.T) {
	clock := fakeclock.New(epoch.Add(time.Second))
	core, logs := observer.New(zap.InfoLevel)
	m := metrics.New()
	svc := ratelimit.New(staticConfig{parse(t, storeErrorConfig)}, localStore(t, downRedis(t), clock),
		ratelimit.WithObserver(m), ratelimit.WithLogger(zap.New(core)), ratelimit.WithClock(clock.Now))
	share := func(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
		return limited(code, 10, rlsv3.RateLimitResponse_RateLimit_MINUTE, "", remaining, time.Minute-time.Second)
	}
	over := &rlsv3.RateLimitResponse_DescriptorStatus{Code: OVER}
	for i, tc := range []struct {
		keys []string
		want *rlsv3.RateLimitResponse // nil: UNAVAILABLE
	}{
		{[]string{"local"}, response(OK, share(OK, 4))},
		{[]string{"local", "allow"}, response(OK, share(OK, 4), bare())},
		{[]string{"local", "deny"}, response(OVER, share(OK, 5), over)},
		{[]string{"local", "default"}, nil},
		{[]string{"local", "default", "deny"}, response(OVER, share(OK, 5), bare(), over)},
	} {
		req := request("se")
		for _, k := range tc.keys {
			req.Descriptors = append(req.Descriptors, desc(k, tc.keys[len(tc.keys)-1]))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := svc.ShouldRateLimit(ctx, req)
		cancel()
		if tc.want == nil {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%v: %v %v, want UNAVAILABLE", tc.keys, resp, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.keys, err)
		}
		assertResponse(t, i, resp, tc.want)
	}
	if got := counterWith(t, m, "ratelimitd_local_decisions_total", "rule", "se.local"); got != 4 {
		t.Errorf("ratelimitd_local_decisions_total{rule=se.local} = %v, want the 4 requests decided locally", got)
	}
	if n := logs.FilterMessageSnippet("rule deciding locally").Len(); n != 1 {
		t.Errorf("%d lines logged the rule going local, want 1", n)
	}
	_, err := svc.Inspect(context.Background(), "se", [][]config.Entry{{{Key: "local", Value: "x"}}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("the counters API with Redis down: %v, want UNAVAILABLE", err)
	}
}

// A rule decided locally is back on Redis, in the log, once Redis has
// decided it again and a second has passed without a local decision.
func TestLocalRuleComesBack(t *testing.T) {
	srv := redistest.StartProcess(t)
	clock := fakeclock.New(epoch.Add(time.Second))
	rs, err := redisstore.New(redisstore.WithAddr(srv.Addr), redisstore.WithTimeout(time.Second), redisstore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	fb := localStore(t, rs, clock)
	core, logs := observer.New(zap.InfoLevel)
	svc := ratelimit.New(staticConfig{parse(t, storeErrorConfig)}, fb, ratelimit.WithLogger(zap.New(core)), ratelimit.WithClock(clock.Now))
	call := func() *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := svc.ShouldRateLimit(ctx, request("se", desc("local", "v")))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	call()
	srv.Stop()
	for range 3 {
		call()
	}
	srv.Restart(t)
	// Until the breaker's probe finds Redis back, a pass charges nothing.
	testkit.WaitFor(t, 10*time.Second, "a pass to charge Redis", func() bool {
		return fb.Reconcile(context.Background()) == 0
	})
	call()
	if n := logs.FilterMessageSnippet("rule back on the store").Len(); n != 0 {
		t.Errorf("logged the rule back %d times within a second of its last local decision", n)
	}
	clock.Advance(2 * time.Second)
	resp := call()
	call()
	if n := logs.FilterMessageSnippet("rule back on the store").Len(); n != 1 {
		t.Errorf("logged the rule back %d times, want once", n)
	}
	// Redis restarted empty (and, without a presence, the replica cannot
	// tell): it holds the 3 hits admitted locally and the two after.
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 10-3-2 {
		t.Errorf("remaining %d after Redis came back, want the hits admitted locally counted", got)
	}
}
