package ratelimit_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const refundConfig = `
domain: tokens
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: shadowed
    rate_limit: {unit: minute, requests_per_unit: 2}
    shadow_mode: true
`

func refund(d *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor {
	d.IsNegativeHits = true
	return d
}

// is_negative_hits gives the descriptor's hits back (its own hits_addend,
// else the request's, where 0 means 1, as for any descriptor), answers OK
// with what is left after the refund, never takes a counter below fresh,
// is kept when the request is denied, and comes before the request's
// admissions.
func TestRefunds(t *testing.T) {
	f := newFixture(t, refundConfig)
	f.clock.Set(epoch.Add(20 * time.Second))
	user := func(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
		return limited(code, 10, rlsv3.RateLimitResponse_RateLimit_MINUTE, "", remaining, 40*time.Second)
	}
	tenant := func(code rlsv3.RateLimitResponse_Code, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
		return limited(code, 2, rlsv3.RateLimitResponse_RateLimit_MINUTE, "", remaining, 40*time.Second)
	}
	steps := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want *rlsv3.RateLimitResponse
	}{
		{"an estimate of 8 (usage)", request("tokens", withHits(desc("user", "a"), 8)), response(OK, user(OK, 2))},
		{"a refund of 6 answers what is left after it", request("tokens", refund(withHits(desc("user", "a"), 6))), response(OK, user(OK, 8))},
		{"the counter is at 2: 8 more fit", request("tokens", withHits(desc("user", "a"), 8)), response(OK, user(OK, 0))},
		{"a refund past the limit is OK too", request("tokens", withHits(desc("user", "a"), 5)), response(OVER, user(OVER, 0))},
		{"refunds never go below fresh", request("tokens", refund(withHits(desc("user", "a"), 100))), response(OK, user(OK, 10))},
		{"usage of 7 on another user", request("tokens", withHits(desc("user", "b"), 7)), response(OK, user(OK, 3))},
		{"a refund without its own hits_addend gives the request's", &rlsv3.RateLimitRequest{Domain: "tokens", HitsAddend: 2,
			Descriptors: descs(refund(desc("user", "b")))}, response(OK, user(OK, 5))},
		{"fill the tenant", request("tokens", desc("tenant", "t"), desc("tenant", "t")), response(OK, tenant(OK, 1), tenant(OK, 0))},
		{"a denied request keeps its refund", request("tokens", refund(withHits(desc("user", "b"), 4)), desc("tenant", "t")),
			response(OVER, user(OK, 9), tenant(OVER, 0))},
		{"the refund came first: its counter is lower by 4", request("tokens", withHits(desc("user", "b"), 0)), response(OK, user(OK, 9))},
		{"an admission is judged after the refund beside it", request("tokens", desc("tenant", "t"), refund(desc("tenant", "t"))),
			response(OK, tenant(OK, 0), tenant(OK, 1))},
		{"a refund of a shadow rule is OK and counted down", request("tokens", refund(withHits(desc("shadowed", "s"), 1))),
			response(OK, limited(OK, 2, rlsv3.RateLimitResponse_RateLimit_MINUTE, "", 2, 40*time.Second))},
	}
	for i, sp := range steps {
		t.Run(sp.name, func(t *testing.T) {
			assertResponse(t, i, f.call(t, sp.req), sp.want)
		})
	}
}

// A refund counts in ratelimitd_negative_hits_total and envoyproxy's
// total_negative_hits, with the hits it asked to give back (a counter
// floored at fresh too), and in no other stat.
func TestRefundMetrics(t *testing.T) {
	m, es, sink := envoyObserver()
	f := newFixture(t, refundConfig, ratelimit.WithObserver(m))
	f.call(t, request("tokens", withHits(desc("user", "a"), 3)))
	f.call(t, request("tokens", refund(withHits(desc("user", "a"), 2))))
	f.call(t, request("tokens", refund(withHits(desc("user", "a"), 5)), desc("tenant", "t")))
	es.Flush()
	for _, c := range []struct {
		metric, rule string
		want         float64
	}{
		{"ratelimitd_negative_hits_total", "tokens.user", 7},
		{"ratelimitd_total_hits_total", "tokens.user", 3},
		{"ratelimitd_within_limit_total", "tokens.user", 3},
		{"ratelimitd_total_hits_total", "tokens.tenant", 1},
	} {
		if got := valueOf(t, m, c.metric, c.rule); got != c.want {
			t.Errorf("%s{rule=%q} = %v, want %v", c.metric, c.rule, got, c.want)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	const user = "ratelimit.service.rate_limit.tokens.user."
	if got := sink.c[user+"total_negative_hits"]; got != 7 {
		t.Errorf("total_negative_hits = %d, want 7 (%v)", got, sink.c)
	}
	if got := sink.c[user+"total_hits"]; got != 3 {
		t.Errorf("total_hits = %d, want 3: a refund is no hit", got)
	}
}
