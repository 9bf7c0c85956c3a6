package rlqstest

import (
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var id = map[string]string{"b": "1"}

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

// tb is a token bucket of maxTokens, perFill tokens per fill.
func tb(maxTokens, perFill uint32, fill *durationpb.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: maxTokens, TokensPerFill: wrapperspb.UInt32(perFill), FillInterval: fill,
	}}}
}

func action(bucket map[string]string, st *typev3.RateLimitStrategy, ttl *durationpb.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: &rlqsv3.BucketId{Bucket: bucket},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: ttl, RateLimitStrategy: st,
		}},
	}
}

func response(actions ...*rlqsv3.RateLimitQuotaResponse_BucketAction) inboxItem {
	return inboxItem{from: "s", resp: &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}}
}

// admits counts the requests of id admitted out of n at the clock's time.
func admits(e *Envoy, n int) int {
	got := 0
	for range n {
		if e.Request(id).Allowed {
			got++
		}
	}
	return got
}

var (
	long = &durationpb.Duration{Seconds: 3600}
	ttl  = &durationpb.Duration{Seconds: 100}
)

// TestTokenBuckets pins the model's token buckets to the filter's
// (global_client_impl.cc, token_bucket_impl.h): what each assignment,
// applied to what the bucket holds, admits.
func TestTokenBuckets(t *testing.T) {
	tests := []struct {
		name  string
		first *typev3.RateLimitStrategy // applied, then used
		use   int                       // requests taken from it
		wait  time.Duration             // then the clock moves
		next  []*typev3.RateLimitStrategy
		want  int // of 50 requests then
	}{
		{"a token bucket held by none starts full", nil, 0, 0, []*typev3.RateLimitStrategy{tb(3, 1, long)}, 3},
		{"the same again is kept, not refilled", tb(3, 1, long), 3, 0, []*typev3.RateLimitStrategy{tb(3, 1, long)}, 0},
		{"fill seconds alone changed: kept, with its old rate", tb(3, 1, long), 3, 0, []*typev3.RateLimitStrategy{tb(3, 1, &durationpb.Duration{Seconds: 1})}, 0},
		{"other nanos: replaced, seeded from a used-up bucket: empty", tb(3, 1, long), 3, 0, []*typev3.RateLimitStrategy{tb(3, 1, &durationpb.Duration{Seconds: 3600, Nanos: 1})}, 0},
		{"other max_tokens: seeded from the remaining share, truncated", tb(4, 1, long), 1, 0, []*typev3.RateLimitStrategy{tb(10, 1, long)}, 7},
		{"same max_tokens, other rate: the held tokens carry over", tb(10, 1, long), 4, 0, []*typev3.RateLimitStrategy{tb(10, 2, long)}, 6},
		{"DENY_ALL then a token bucket in one response: full", tb(3, 1, long), 3, 0, []*typev3.RateLimitStrategy{blanket(typev3.RateLimitStrategy_DENY_ALL), tb(5, 1, long)}, 5},
		{"refills continuously at tokens_per_fill / fill seconds", tb(100, 4, &durationpb.Duration{Seconds: 2}), 100, 2500 * time.Millisecond, nil, 5},
		{"refills up to max_tokens only", tb(3, 1, &durationpb.Duration{Seconds: 1}), 3, 10 * time.Second, nil, 3},
		{"fill interval under a second: divides by zero, admits all", nil, 0, 0, []*typev3.RateLimitStrategy{tb(1, 1, &durationpb.Duration{Nanos: 500_000_000})}, 50},
		{"fill interval 1.9 s is 1 s", tb(10, 1, &durationpb.Duration{Seconds: 1, Nanos: 900_000_000}), 10, 3 * time.Second, nil, 3},
		{"RequestsPerTimeUnit is skipped: the token bucket stays", tb(3, 1, long), 1, 0, []*typev3.RateLimitStrategy{{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: 100, TimeUnit: typev3.RateLimitUnit_SECOND}}}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := NewClock(time.Unix(1000, 0))
			e := NewEnvoy(Settings{Domain: "d", NoAssignment: blanket(typev3.RateLimitStrategy_DENY_ALL)}, clock, nil)
			e.Request(id) // creates the bucket
			apply := func(sts ...*typev3.RateLimitStrategy) {
				var acts []*rlqsv3.RateLimitQuotaResponse_BucketAction
				for _, st := range sts {
					acts = append(acts, action(id, st, ttl))
				}
				e.mu.Lock()
				e.apply(response(acts...), clock.Now())
				e.mu.Unlock()
			}
			if tt.first != nil {
				apply(tt.first)
				if got := admits(e, tt.use); got != tt.use {
					t.Fatalf("the first assignment admitted %d of %d", got, tt.use)
				}
			}
			clock.Advance(tt.wait)
			apply(tt.next...)
			if got := admits(e, 50); got != tt.want {
				t.Errorf("%d of 50 admitted, want %d (%s)", got, tt.want, e.Describe(id))
			}
		})
	}
}

// TestExpiryAndActions: TTLs count whole seconds; an expired assignment
// falls back to the expired behavior for its timeout (whole seconds), then
// to the no-assignment one; an action for an unknown bucket is dropped; an
// abandon forgets the bucket; a request whose bucket id cannot be built is
// allowed and creates no bucket.
func TestExpiryAndActions(t *testing.T) {
	clock := NewClock(time.Unix(1000, 0))
	e := NewEnvoy(Settings{Domain: "d", Expired: blanket(typev3.RateLimitStrategy_ALLOW_ALL), ExpiredFor: 2500 * time.Millisecond}, clock, nil)
	apply := func(acts ...*rlqsv3.RateLimitQuotaResponse_BucketAction) {
		e.mu.Lock()
		e.apply(response(acts...), clock.Now())
		e.mu.Unlock()
	}
	if got := admits(e, 5); got != 5 {
		t.Fatalf("no assignment (ALLOW_ALL by default): %d of 5 admitted", got)
	}
	apply(action(map[string]string{"other": "x"}, blanket(typev3.RateLimitStrategy_DENY_ALL), long))
	if d := e.Describe(map[string]string{"other": "x"}); d != "no bucket" {
		t.Errorf("an assignment for an unknown bucket: %s, want no bucket", d)
	}
	// 1.9 s is 1 s: expired then into ALLOW_ALL for 2 s (2.5 s truncated),
	// then the no-assignment behavior (ALLOW_ALL: the default).
	apply(action(id, blanket(typev3.RateLimitStrategy_DENY_ALL), &durationpb.Duration{Seconds: 1, Nanos: 900_000_000}))
	for i, st := range []struct {
		after time.Duration
		want  int
		desc  string
	}{{999 * time.Millisecond, 0, "deny_all"}, {time.Millisecond, 1, "fallback allow_all"}, {1999 * time.Millisecond, 1, "fallback"}, {time.Millisecond, 1, "no assignment"}} {
		clock.Advance(st.after)
		if got := admits(e, 1); got != st.want {
			t.Errorf("step %d: %d admitted, want %d (%s)", i, got, st.want, e.Describe(id))
		}
		if d := e.Describe(id); len(d) < len(st.desc) || d[:len(st.desc)] != st.desc {
			t.Errorf("step %d: %s, want %s", i, d, st.desc)
		}
	}
	apply(&rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: &rlqsv3.BucketId{Bucket: id}, BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{}})
	if d := e.Describe(id); d != "no bucket" {
		t.Errorf("after an abandon: %s, want no bucket", d)
	}
	v := e.Request(map[string]string{"route": "api", "tenant": Missing})
	if !v.Allowed || !v.Unbucketed || len(e.buckets) != 0 {
		t.Errorf("a request without its custom value: %+v, %d buckets; want allowed, unbucketed, none", v, len(e.buckets))
	}
}
