package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// fakeStore records every Take and answers with fn (default: allow all).
type fakeStore struct {
	fn    func(ctx context.Context, reqs []store.Request) ([]store.Result, error)
	mu    sync.Mutex
	calls [][]store.Request
}

var _ store.Store = (*fakeStore)(nil)

func (f *fakeStore) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]store.Request(nil), reqs...))
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, reqs)
	}
	out := make([]store.Result, len(reqs))
	for i := range out {
		out[i].Allowed = true
	}
	return out, nil
}

func (f *fakeStore) Close() error { return nil }

func (f *fakeStore) takes() [][]store.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestOneTakePerRequest(t *testing.T) {
	cfg := parse(t, testConfig)
	keys := config.KeyBuilder{Prefix: "p_"}
	for _, n := range []int{1, 2, 7, 64} {
		fs := &fakeStore{}
		svc := ratelimit.New(staticConfig{cfg}, fs, ratelimit.WithKeyBuilder(keys))
		req := &rlsv3.RateLimitRequest{Domain: "test", HitsAddend: 2}
		var want []store.Request
		for i := range n {
			// Every third descriptor is not counted; the rest are.
			if i%3 == 2 {
				req.Descriptors = append(req.Descriptors, desc("unlimited", ""))
				continue
			}
			d := desc("big", "")
			req.Descriptors = append(req.Descriptors, d)
			entries := []config.Entry{{Key: "big"}}
			rule := cfg.Match("test", entries)
			want = append(want, store.Request{Key: keys.Key(rule, entries), Limit: rule.Limit, Hits: 2, Mode: algorithms.Enforce})
		}
		if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatalf("%d descriptors: %v", n, err)
		}
		calls := fs.takes()
		if len(calls) != 1 {
			t.Fatalf("%d descriptors: %d Take calls, want 1", n, len(calls))
		}
		if len(calls[0]) != len(want) {
			t.Fatalf("%d descriptors: Take got %d requests, want %d", n, len(calls[0]), len(want))
		}
		for i := range want {
			if calls[0][i] != want[i] {
				t.Errorf("%d descriptors: request %d = %+v, want %+v", n, i, calls[0][i], want[i])
			}
		}
	}

	// Nothing to count: no round trip at all.
	fs := &fakeStore{}
	svc := ratelimit.New(staticConfig{cfg}, fs)
	if _, err := svc.ShouldRateLimit(context.Background(), request("test", desc("unlimited", ""), desc("nomatch", ""))); err != nil {
		t.Fatal(err)
	}
	if n := len(fs.takes()); n != 0 {
		t.Errorf("uncounted request: %d Take calls, want 0", n)
	}
}

// Shadow and quota rules ride in the same single Take, marked with their
// Mode so the store keeps them from vetoing the rest of the request.
func TestShadowAndQuotaStayOneRoundTrip(t *testing.T) {
	cfg := parse(t, testConfig)
	tests := []struct {
		name         string
		globalShadow bool
		req          *rlsv3.RateLimitRequest
		wantModes    []algorithms.Mode
		// wantCode is envoyproxy's answer to the store's verdicts.
		wantCode rlsv3.RateLimitResponse_Code
	}{
		{"shadow rule", false, request("test", desc("shadow", ""), desc("big", "")), []algorithms.Mode{algorithms.Shadow, algorithms.Enforce}, OK},
		{"global shadow mode", true, request("test", desc("big", ""), desc("one", "")), []algorithms.Mode{algorithms.Shadow, algorithms.Shadow}, OK},
		{"quota rules", false, request("test", desc("q1", ""), desc("q2", ""), desc("big", "")), []algorithms.Mode{algorithms.Quota, algorithms.Quota, algorithms.Enforce}, OVER},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The store denies everything but "big": the worst case for a retry.
			bigKey := config.KeyBuilder{}.Key(cfg.Match("test", []config.Entry{{Key: "big"}}), []config.Entry{{Key: "big"}})
			fs := &fakeStore{fn: func(_ context.Context, reqs []store.Request) ([]store.Result, error) {
				out := make([]store.Result, len(reqs))
				for i, r := range reqs {
					out[i].Allowed = r.Key == bigKey
				}
				return out, nil
			}}
			svc := ratelimit.New(staticConfig{cfg}, fs, ratelimit.WithShadowMode(tt.globalShadow))
			resp, err := svc.ShouldRateLimit(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			calls := fs.takes()
			if len(calls) != 1 {
				t.Fatalf("%d Take calls, want exactly 1", len(calls))
			}
			if resp.GetOverallCode() != tt.wantCode {
				t.Errorf("overall code %v, want %v", resp.GetOverallCode(), tt.wantCode)
			}
			var modes []algorithms.Mode
			for _, r := range calls[0] {
				modes = append(modes, r.Mode)
			}
			if len(modes) != len(tt.wantModes) {
				t.Fatalf("modes %v, want %v", modes, tt.wantModes)
			}
			for i := range modes {
				if modes[i] != tt.wantModes[i] {
					t.Fatalf("modes %v, want %v", modes, tt.wantModes)
				}
			}
		})
	}
}

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
