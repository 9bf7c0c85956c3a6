package ratelimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

const admissionConfig = `
domain: adm
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: fallback
    rate_limit: {unit: hour, requests_per_unit: 10, on_store_error: allow}
`

// stalledRedis is a real Redis and a store on it with a REDIS_TIMEOUT far
// past anything the test waits for, and stall, which freezes the Redis
// process until the returned resume runs.
func stalledRedis(t *testing.T) (st *redisstore.Store, stall func() (resume func())) {
	t.Helper()
	srv := redistest.StartProcess(t)
	st, err := redisstore.New(redisstore.WithAddr(srv.Addr), redisstore.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, func() func() { return srv.Freeze(t) }
}

func TestMaxConcurrentRequests(t *testing.T) {
	st, pause := stalledRedis(t)
	const maxConcurrent, refused = 3, 50
	svc := ratelimit.New(staticConfig{parse(t, admissionConfig)}, st, ratelimit.WithAdmission(maxConcurrent, 0))
	req := request("adm", desc("k", "v"))
	if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
		t.Fatal(err) // the script is loaded, the connection made
	}

	resume := pause()
	done := make(chan error, maxConcurrent)
	for range maxConcurrent {
		go func() {
			_, err := svc.ShouldRateLimit(context.Background(), req)
			done <- err
		}()
	}
	testkit.WaitFor(t, 10*time.Second, "the stalled calls to be in progress", func() bool {
		inFlight, _, _ := svc.Admission()
		return inFlight == maxConcurrent
	})
	for range refused {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if resp != nil || status.Code(err) != codes.ResourceExhausted || !hasReason(err, ratelimit.OverloadedReason) {
			t.Fatalf("past the cap: %v, %v; want RESOURCE_EXHAUSTED with reason %s", resp, err, ratelimit.OverloadedReason)
		}
	}
	// /json shares the cap and answers 503: 429 would read as OVER_LIMIT.
	rec := httptest.NewRecorder()
	svc.JSONHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(`{"domain":"adm","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`)))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/json past the cap: %d %s, want 503", rec.Code, rec.Body)
	}
	// A caller that has already gone takes no slot and is not counted.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := svc.ShouldRateLimit(gone, req); status.Code(err) != codes.Canceled {
		t.Errorf("canceled caller: %v, want Canceled", err)
	}
	if inFlight, rejected, _ := svc.Admission(); inFlight != maxConcurrent || rejected != refused+1 {
		t.Errorf("in flight %d, refused %d; want %d, %d", inFlight, rejected, maxConcurrent, refused+1)
	}

	resume()
	for range maxConcurrent {
		if err := <-done; err != nil {
			t.Errorf("a stalled call once Redis answered: %v", err)
		}
	}
	// The refused calls charged nothing: the first call and the three
	// stalled ones did, and this one.
	resp, err := svc.ShouldRateLimit(context.Background(), req)
	if err != nil || resp.GetStatuses()[0].GetLimitRemaining() != 10-maxConcurrent-2 {
		t.Fatalf("after the stall: %v, %v; want %d left", resp, err, 10-maxConcurrent-2)
	}
	if inFlight, _, _ := svc.Admission(); inFlight != 0 {
		t.Errorf("in flight after the stall: %d", inFlight)
	}
}

func hasReason(err error, reason string) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == reason {
			return true
		}
	}
	return false
}

func TestRequestTimeout(t *testing.T) {
	st, pause := stalledRedis(t)
	const timeout = 300 * time.Millisecond
	svc := ratelimit.New(staticConfig{parse(t, admissionConfig)}, st, ratelimit.WithAdmission(0, timeout))
	pause()
	for _, tt := range []struct {
		name     string
		deadline time.Duration // the caller's; 0: none
		desc     string
		want     codes.Code
		timedOut uint64
	}{
		{name: "REQUEST_TIMEOUT ends the wait: UNAVAILABLE", desc: "k", want: codes.Unavailable, timedOut: 1},
		{name: "the caller's shorter deadline stays the caller's", deadline: timeout / 3, desc: "k", want: codes.DeadlineExceeded, timedOut: 1},
		{name: "time kept back for on_store_error: answered", desc: "fallback", want: codes.OK, timedOut: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			returned := make(chan error, 1)
			go func() {
				_, err := svc.ShouldRateLimit(ctx, request("adm", desc(tt.desc, "v")))
				returned <- err
			}()
			select {
			case err := <-returned:
				if status.Code(err) != tt.want {
					t.Fatalf("%v, want %v", err, tt.want)
				}
				if tt.want == codes.Unavailable && !strings.Contains(err.Error(), "REQUEST_TIMEOUT") {
					t.Errorf("%v does not say REQUEST_TIMEOUT ended it", err)
				}
			case <-time.After(timeout + testkit.Slack):
				t.Fatal("the call outlived REQUEST_TIMEOUT (REDIS_TIMEOUT is a minute)")
			}
			if _, _, timedOut := svc.Admission(); timedOut != tt.timedOut {
				t.Errorf("timed out %d, want %d", timedOut, tt.timedOut)
			}
		})
	}
}
