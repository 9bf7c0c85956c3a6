package ratelimit_test

import (
	"context"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

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
