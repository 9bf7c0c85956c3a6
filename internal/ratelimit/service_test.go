package ratelimit_test

import (
	"math"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const testConfig = `
domain: test
descriptors:
  - key: per_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: per_second
    value: hi
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: unlimited
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: old
    rate_limit: {unit: minute, requests_per_unit: 1, name: old}
  - key: new
    rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: old}]}
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: half
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 30}
`

const (
	SECOND = rlsv3.RateLimitResponse_RateLimit_SECOND
	MINUTE = rlsv3.RateLimitResponse_RateLimit_MINUTE
	HOUR   = rlsv3.RateLimitResponse_RateLimit_HOUR
)

type step struct {
	advance time.Duration
	req     *rlsv3.RateLimitRequest
	want    *rlsv3.RateLimitResponse
}

// big is the status of a 10/minute limit with rem left.
func big(rem uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	return limited(OK, 10, MINUTE, "", rem, time.Minute)
}

var shouldRateLimitTests = []struct {
	name  string
	opts  []ratelimit.Option
	steps []step
}{{
	name: "fixed window counts and resets like envoyproxy",
	steps: []step{
		{advance: 15500 * time.Millisecond, req: request("test", desc("per_minute", "")),
			want: response(OK, limited(OK, 2, MINUTE, "", 1, 45*time.Second))},
		{req: request("test", desc("per_minute", "")),
			want: response(OK, limited(OK, 2, MINUTE, "", 0, 45*time.Second))},
		{req: request("test", desc("per_minute", "")),
			want: response(OVER, limited(OVER, 2, MINUTE, "", 0, 45*time.Second))},
		{advance: 45 * time.Second, req: request("test", desc("per_minute", "")),
			want: response(OK, limited(OK, 2, MINUTE, "", 1, 60*time.Second))},
	},
}, {
	name: "unknown domain and unmatched descriptors are a bare OK",
	steps: []step{
		{req: request("nope", desc("per_minute", "")), want: response(OK, bare())},
		{req: request("test", desc("missing", "x"), desc("per_second", "other"), desc("per_minute", "", "extra", "1")),
			want: response(OK, bare(), bare(), bare())},
		{req: request("test", desc("per_second", "hi")),
			want: response(OK, limited(OK, 10, SECOND, "", 9, time.Second))},
	},
}, {
	name: "unlimited is never counted",
	steps: []step{
		{req: request("test", desc("unlimited", "a")), want: response(OK, unlimitedStatus())},
		{req: request("test", desc("unlimited", "a")), want: response(OK, unlimitedStatus())},
		{req: request("test", desc("unlimited", "a"), desc("one", "")),
			want: response(OK, unlimitedStatus(), limited(OK, 1, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "requests_per_unit zero is always over",
	steps: []step{
		{req: request("test", desc("zero", "")), want: response(OVER, limited(OVER, 0, HOUR, "", 0, time.Hour))},
	},
}, {
	name: "descriptor limit overrides the config and counts apart",
	steps: []step{
		{req: request("test", withOverride(desc("per_minute", ""), 1, typev3.RateLimitUnit_SECOND)),
			want: response(OK, limited(OK, 1, SECOND, "", 0, time.Second))},
		{req: request("test", withOverride(desc("per_minute", ""), 1, typev3.RateLimitUnit_SECOND)),
			want: response(OVER, limited(OVER, 1, SECOND, "", 0, time.Second))},
		{req: request("test", desc("per_minute", "")),
			want: response(OK, limited(OK, 2, MINUTE, "", 1, time.Minute))},
		// An override needs no matching rule, only a known domain.
		{req: request("test", withOverride(desc("anything", "x"), 5, typev3.RateLimitUnit_HOUR)),
			want: response(OK, limited(OK, 5, HOUR, "", 4, time.Hour))},
		{req: request("nope", withOverride(desc("per_minute", ""), 1, typev3.RateLimitUnit_SECOND)),
			want: response(OK, bare())},
		// Our extension: unit_multiplier widens the window.
		{advance: time.Minute, req: request("test", withMultiplierOverride(desc("per_minute", ""), 3, typev3.RateLimitUnit_MINUTE, 5)),
			want: response(OK, withMultiplier(limited(OK, 3, MINUTE, "", 2, 4*time.Minute), 5))},
	},
}, {
	name: "a replaced rule is a bare OK and not counted",
	steps: []step{
		{req: request("test", desc("old", ""), desc("new", "")),
			want: response(OK, bare(), limited(OK, 5, MINUTE, "", 4, time.Minute))},
		{req: request("test", desc("old", "")),
			want: response(OK, limited(OK, 1, MINUTE, "old", 0, time.Minute))},
		{req: request("test", desc("new", ""), desc("old", "")),
			want: response(OK, limited(OK, 5, MINUTE, "", 3, time.Minute), bare())},
	},
}, {
	name: "shadow_mode counts but answers OK",
	steps: []step{
		{req: request("test", desc("shadow", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("shadow", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "a shadow rule over its limit does not stop the others being charged",
	steps: []step{
		{req: request("test", desc("shadow", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("shadow", ""), desc("big", "")),
			want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute), big(9))},
		{req: request("test", desc("big", "")), want: response(OK, big(8))},
	},
}, {
	name: "a denied request consumes nothing",
	steps: []step{
		{req: request("test", desc("big", ""), desc("one", "")),
			want: response(OK, big(9), limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("big", ""), desc("one", "")),
			want: response(OVER, big(9), limited(OVER, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("big", "")), want: response(OK, big(8))},
	},
}, {
	name: "the same counter twice in one request is charged twice, all or nothing",
	steps: []step{
		{req: request("test", desc("one", ""), desc("one", "")),
			want: response(OVER, limited(OK, 1, MINUTE, "", 1, time.Minute), limited(OVER, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("one", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "hits: request hits_addend, zero means one",
	steps: []step{
		{req: &rlsv3.RateLimitRequest{Domain: "test", Descriptors: descs(desc("big", "")), HitsAddend: 3},
			want: response(OK, big(7))},
		{req: &rlsv3.RateLimitRequest{Domain: "test", Descriptors: descs(desc("big", "")), HitsAddend: 0},
			want: response(OK, big(6))},
	},
}, {
	// The descriptor's own hits_addend is usage, recorded past the limit
	// as envoyproxy records it; the request's is an admission.
	name: "hits: descriptor hits_addend wins and is usage, zero only checks",
	steps: []step{
		{req: &rlsv3.RateLimitRequest{Domain: "test", Descriptors: descs(withHits(desc("big", ""), 2)), HitsAddend: 5},
			want: response(OK, big(8))},
		{req: &rlsv3.RateLimitRequest{Domain: "test", Descriptors: descs(withHits(desc("big", ""), 0)), HitsAddend: 5},
			want: response(OK, big(8))},
		{req: &rlsv3.RateLimitRequest{Domain: "test", Descriptors: descs(desc("big", "")), HitsAddend: 9},
			want: response(OVER, limited(OVER, 10, MINUTE, "", 8, time.Minute))},
		{req: request("test", withHits(desc("big", ""), 9)),
			want: response(OVER, limited(OVER, 10, MINUTE, "", 0, time.Minute))},
		{req: request("test", withHits(desc("big", ""), 0)),
			want: response(OVER, limited(OVER, 10, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("big", "")), want: response(OVER, limited(OVER, 10, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "quota_mode: over only when every quota rule is",
	steps: []step{
		{req: request("test", desc("q1", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("q1", ""), desc("q2", "")),
			want: response(OK, limited(OVER, 1, MINUTE, "", 0, time.Minute), limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("q1", ""), desc("q2", "")),
			want: response(OVER, limited(OVER, 1, MINUTE, "", 0, time.Minute), limited(OVER, 1, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "global shadow mode keeps statuses but answers OK",
	opts: []ratelimit.Option{ratelimit.WithShadowMode(true)},
	steps: []step{
		{req: request("test", desc("one", "")), want: response(OK, limited(OK, 1, MINUTE, "", 0, time.Minute))},
		{req: request("test", desc("one", "")), want: response(OK, limited(OVER, 1, MINUTE, "", 0, time.Minute))},
	},
}, {
	name: "unit_multiplier is reported and windows span it",
	steps: []step{
		{advance: 10 * time.Second, req: request("test", desc("half", "")),
			want: response(OK, withMultiplier(limited(OK, 1, SECOND, "", 0, 20*time.Second), 30))},
		{advance: 19500 * time.Millisecond, req: request("test", desc("half", "")),
			want: response(OVER, withMultiplier(limited(OVER, 1, SECOND, "", 0, time.Second), 30))},
	},
}}

func TestShouldRateLimit(t *testing.T) {
	for _, tt := range shouldRateLimitTests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig, tt.opts...)
			for i, s := range tt.steps {
				f.clock.Advance(s.advance)
				assertResponse(t, i, f.call(t, s.req), s.want)
			}
		})
	}
}

func unlimitedStatus() *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: OK, LimitRemaining: math.MaxUint32}
}

func withMultiplier(s *rlsv3.RateLimitResponse_DescriptorStatus, m uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	s.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(m)
	return s
}

func withMultiplierOverride(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit, m uint32) *ratelimitv3.RateLimitDescriptor {
	d = withOverride(d, rpu, unit)
	d.Limit.UnitMultiplier = wrapperspb.UInt32(m)
	return d
}
