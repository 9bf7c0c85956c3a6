package rlqs

import (
	"math"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// strategy is an assignment as Envoy's filter applies it: a blanket rule
// or a token bucket. RequestsPerTimeUnit is never sent: the filter does
// not enforce it (it allows every request).
type strategy uint8

const (
	noStrategy strategy = iota
	allowAll
	denyAll
	tokenBucket
)

func (s strategy) String() string {
	switch s {
	case allowAll:
		return "allow_all"
	case denyAll:
		return "deny_all"
	case tokenBucket:
		return "token_bucket"
	default:
		return "none"
	}
}

// assignment is what a bucket was last sent.
type assignment struct {
	strategy strategy
	// A token bucket: maxTokens that refill perFill tokens per fill
	// seconds (see window, encodeRate); nanos tells two grants apart (see
	// tokenBucketOf).
	maxTokens uint32
	perFill   uint32
	fill      int64
	nanos     int32
	// expires is when Envoy's copy expires at the latest: sent + ttl +
	// the expiry margin.
	expires time.Time
	// stretched: the TTL was already stretched to the window's end
	// (stream.stretch).
	stretched bool
}

// ttlSeconds is a TTL as Envoy's filter reads it: whole seconds (it drops
// the nanos), so only whole seconds are sent.
func ttlSeconds(d time.Duration) int64 { return int64(d / time.Second) }

// action builds the BucketAction that sends a (with ttl whole seconds).
func (a assignment) action(id *rlqsv3.BucketId, ttl int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	var st typev3.RateLimitStrategy
	switch a.strategy {
	case allowAll:
		st.Strategy = &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}
	case denyAll:
		st.Strategy = &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}
	default:
		st.Strategy = &typev3.RateLimitStrategy_TokenBucket{TokenBucket: a.tokenBucketOf()}
	}
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: &durationpb.Duration{Seconds: ttl},
				RateLimitStrategy:    &st,
			},
		},
	}
}

// tokenBucketOf is the grant as Envoy's TokenBucket. Envoy's filter keeps
// the token bucket it has when a new one has the same max_tokens,
// tokens_per_fill and fill_interval *nanos* (it compares no seconds), and
// otherwise replaces it, seeded from what the old one holds
// (global_client_impl.cc). A new grant must replace the old one (its rate
// may differ in seconds only), a TTL stretch must not: so each grant gets
// its own nanos, which the filter's rate ignores (it truncates
// fill_interval to whole seconds).
func (a assignment) tokenBucketOf() *typev3.TokenBucket {
	return &typev3.TokenBucket{
		MaxTokens:     a.maxTokens,
		TokensPerFill: wrapperspb.UInt32(a.perFill),
		FillInterval:  &durationpb.Duration{Seconds: a.fill, Nanos: a.nanos},
	}
}

// abandonAction tells Envoy to forget the bucket.
func abandonAction(id *rlqsv3.BucketId) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{},
		},
	}
}

// fillSeconds is a fill interval longer than any life a grant of limits
// whose windows last up to longest can have (it ends with their window):
// whole seconds, at least 2.
func fillSeconds(longest time.Duration) int64 {
	s := int64(math.Ceil(longest.Seconds()))
	return max(s, 1) + 1
}
