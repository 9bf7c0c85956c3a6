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

func tb(maxTokens uint32, fill *durationpb.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: maxTokens, TokensPerFill: wrapperspb.UInt32(1), FillInterval: fill,
	}}}
}

func assignment(bucket map[string]string, st *typev3.RateLimitStrategy, ttl *durationpb.Duration) inboxItem {
	return inboxItem{from: "s", resp: &rlqsv3.RateLimitQuotaResponse{BucketAction: []*rlqsv3.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqsv3.BucketId{Bucket: bucket},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: ttl, RateLimitStrategy: st,
		}},
	}}}}
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

// TestEnvoyFilterBehaviour pins the simulator to the filter's behaviour
// as its source reads (global_client_impl.cc, filter.cc), gaps included.
func TestEnvoyFilterBehaviour(t *testing.T) {
	clock := NewClock(time.Unix(1000, 0))
	e := NewEnvoy(Settings{Domain: "d", Interval: time.Second, Expired: blanket(typev3.RateLimitStrategy_ALLOW_ALL), ExpiredFor: 2500 * time.Millisecond}, clock, nil)
	apply := func(it inboxItem) { e.mu.Lock(); e.apply(it, clock.Now()); e.mu.Unlock() }
	long := &durationpb.Duration{Seconds: 3600}

	if got := admits(e, 5); got != 5 {
		t.Fatalf("no assignment (ALLOW_ALL by default): %d of 5 admitted", got)
	}
	apply(assignment(id, tb(3, long), &durationpb.Duration{Seconds: 10}))
	if got := admits(e, 5); got != 3 {
		t.Errorf("a new token bucket starts full, never refills a token within its fill interval: %d admitted, want 3", got)
	}
	apply(assignment(id, tb(3, long), &durationpb.Duration{Seconds: 10}))
	if got := admits(e, 5); got != 0 {
		t.Errorf("the same token bucket again is kept, not refilled: %d admitted, want 0", got)
	}
	apply(assignment(id, tb(3, &durationpb.Duration{Seconds: 3600, Nanos: 1}), &durationpb.Duration{Seconds: 10}))
	if got := admits(e, 5); got != 3 {
		t.Errorf("other fill_interval nanos make a new, full bucket: %d admitted, want 3", got)
	}
	rptu := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: 100, TimeUnit: typev3.RateLimitUnit_SECOND}}}
	apply(assignment(id, rptu, &durationpb.Duration{Seconds: 10}))
	if got := admits(e, 5); got != 0 {
		t.Errorf("RequestsPerTimeUnit is skipped, the token bucket stays: %d admitted, want 0", got)
	}
	apply(assignment(map[string]string{"other": "x"}, blanket(typev3.RateLimitStrategy_DENY_ALL), long))
	if _, ok := e.buckets[idKey(map[string]string{"other": "x"})]; ok {
		t.Error("an assignment for an unknown bucket created it")
	}

	// TTLs are whole seconds: 1.9 s expires after 1 s, into the expired
	// behavior for 2 s (2.5 s truncated), then the no-assignment one.
	apply(assignment(id, blanket(typev3.RateLimitStrategy_DENY_ALL), &durationpb.Duration{Seconds: 1, Nanos: 900_000_000}))
	steps := []struct {
		after time.Duration
		want  int
	}{{999 * time.Millisecond, 0}, {time.Millisecond, 1}, {1999 * time.Millisecond, 1}, {time.Millisecond, 1}}
	for i, st := range steps {
		clock.Advance(st.after)
		e.Tick()
		if got := admits(e, 1); got != st.want {
			t.Errorf("step %d: %d admitted, want %d (%s)", i, got, st.want, e.Describe(id))
		}
	}
	if d := e.Describe(id); d != "no assignment" {
		t.Errorf("after the expired behavior's timeout: %s, want no assignment", d)
	}

	// A fill interval under a second divides by zero in the filter: it
	// admits everything.
	apply(assignment(id, tb(1, &durationpb.Duration{Nanos: 500_000_000}), long))
	if got := admits(e, 50); got != 50 {
		t.Errorf("fill interval 0.5 s: %d of 50 admitted, want all", got)
	}
	e.apply(inboxItem{resp: &rlqsv3.RateLimitQuotaResponse{BucketAction: []*rlqsv3.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqsv3.BucketId{Bucket: id}, BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{},
	}}}}, clock.Now())
	if d := e.Describe(id); d != "no bucket" {
		t.Errorf("after an abandon: %s, want no bucket", d)
	}
}
