package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func TestBackendErrors(t *testing.T) {
	cfg := parse(t, testConfig)
	boom := errors.New("connection refused")
	tests := []struct {
		name     string
		fn       func(ctx context.Context, reqs []store.Request) ([]store.Result, error)
		ctx      func() (context.Context, context.CancelFunc)
		wantCode codes.Code
		wantMsg  string
	}{{
		name:     "store error",
		fn:       func(context.Context, []store.Request) ([]store.Result, error) { return nil, boom },
		wantCode: codes.Unavailable,
		wantMsg:  "backend unavailable: take 1 keys: connection refused",
	}, {
		name:     "short result",
		fn:       func(context.Context, []store.Request) ([]store.Result, error) { return nil, nil },
		wantCode: codes.Unavailable,
		wantMsg:  "store answered 0 results for 1 requests",
	}, {
		name: "caller deadline",
		fn: func(ctx context.Context, _ []store.Request) ([]store.Result, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return nil, errors.New("slow store was not canceled")
			}
		},
		ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		},
		wantCode: codes.DeadlineExceeded,
		wantMsg:  "deadline exceeded waiting for the backend",
	}, {
		name: "caller canceled",
		fn: func(ctx context.Context, _ []store.Request) ([]store.Result, error) {
			return nil, ctx.Err()
		},
		ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		wantCode: codes.Canceled,
		wantMsg:  "canceled",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := ratelimit.New(staticConfig{cfg}, &fakeStore{fn: tt.fn})
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			start := time.Now()
			resp, err := svc.ShouldRateLimit(ctx, request("test", desc("big", "")))
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("took %v; the caller's deadline was not honoured", elapsed)
			}
			if resp != nil {
				t.Errorf("response = %v, want nil (never a fake OK)", resp)
			}
			st := status.Convert(err)
			if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantMsg) {
				t.Errorf("error = %v %q, want %v containing %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestNoConfigLoaded(t *testing.T) {
	fs := &fakeStore{}
	svc := ratelimit.New(staticConfig{nil}, fs)
	_, err := svc.ShouldRateLimit(context.Background(), request("test", desc("big", "")))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("error = %v, want Unavailable", err)
	}
	if len(fs.takes()) != 0 {
		t.Error("the store was called without a config")
	}
	if svc.Healthy() {
		t.Error("Healthy() = true without a config")
	}
}

func TestBackendErrorsAreLoggedAtMostOnceASecond(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	fs := &fakeStore{fn: func(context.Context, []store.Request) ([]store.Result, error) {
		return nil, errors.New("down")
	}}
	svc := ratelimit.New(staticConfig{parse(t, testConfig)}, fs, ratelimit.WithLogger(zap.New(core)))
	const calls = 200
	start := time.Now()
	for range calls {
		if _, err := svc.ShouldRateLimit(context.Background(), request("test", desc("big", ""))); err == nil {
			t.Fatal("want an error")
		}
	}
	// The sampler's one-second tick may fall inside the loop once.
	maxLines := 2 + int(time.Since(start)/time.Second)
	if n := logs.Len(); n < 1 || n > maxLines {
		t.Errorf("%d failures logged %d lines, want 1..%d", calls, n, maxLines)
	}
}

func TestStatusMapping(t *testing.T) {
	cfg := parse(t, `
domain: test
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	tests := []struct {
		name string
		key  string
		dec  algorithms.Decision
		want *rlsv3.RateLimitResponse_DescriptorStatus
	}{{
		name: "other algorithms keep microseconds",
		key:  "tb",
		dec:  algorithms.Decision{Allowed: true, Remaining: 1, ResetAfter: 1500*time.Millisecond + 1234*time.Nanosecond},
		want: limited(OK, 2, SECOND, "", 1, 1500001*time.Microsecond),
	}, {
		name: "fixed window rounds up to whole seconds",
		key:  "fw",
		dec:  algorithms.Decision{Allowed: true, Remaining: 3, ResetAfter: 44*time.Second + time.Microsecond},
		want: limited(OK, 5, MINUTE, "", 3, 45*time.Second),
	}, {
		name: "fixed window on a whole second is unchanged",
		key:  "fw",
		dec:  algorithms.Decision{Allowed: false, Remaining: 0, ResetAfter: 44 * time.Second, RetryAfter: 44 * time.Second},
		want: limited(OVER, 5, MINUTE, "", 0, 44*time.Second),
	}, {
		name: "remaining beyond uint32 is clamped",
		key:  "tb",
		dec:  algorithms.Decision{Allowed: true, Remaining: 1 << 40},
		want: &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               OK,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 2, Unit: SECOND},
			LimitRemaining:     math.MaxUint32,
			DurationUntilReset: durationpb.New(0),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &fakeStore{fn: func(context.Context, []store.Request) ([]store.Result, error) {
				return []store.Result{{Decision: tt.dec}}, nil
			}}
			svc := ratelimit.New(staticConfig{cfg}, fs)
			resp, err := svc.ShouldRateLimit(context.Background(), request("test", desc(tt.key, "")))
			if err != nil {
				t.Fatal(err)
			}
			code := OK
			if tt.want.Code == OVER {
				code = OVER
			}
			assertResponse(t, 0, resp, response(code, tt.want))
		})
	}
}
