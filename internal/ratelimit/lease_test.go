package ratelimit_test

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/ratelimitd/ratelimitd/internal/ratelimit"
)

const leaseConfig = `
domain: l
descriptors:
  - key: unset
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: on
    lease: true
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: gcra}
  - key: off
    lease: false
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: log
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: sliding_log}
  - key: stepped
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, refill_interval: 100ms}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: shadow
    lease: true
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: quota
    lease: true
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: several
    rate_limits:
      - {unit: second, requests_per_unit: 100}
      - {unit: day, requests_per_unit: 1000, algorithm: sliding_log}
  - key: several_on
    lease: true
    rate_limits:
      - {unit: second, requests_per_unit: 100}
      - {unit: day, requests_per_unit: 1000, algorithm: sliding_window}
`

// TestOpLease: the ops of a request carry store.Request.Lease exactly when
// their rule leases (its lease field, else LEASE_ENABLED), their limit can
// lease, and they are enforced admissions or refunds: never shadow, quota
// or usage ops.
func TestOpLease(t *testing.T) {
	cfg := parse(t, leaseConfig)
	usage := func(d *ratelimitv3.RateLimitDescriptor) *ratelimitv3.RateLimitDescriptor { return withHits(d, 5) }
	tests := []struct {
		name         string
		global       bool
		globalShadow bool
		globalQuota  bool
		req          *rlsv3.RateLimitRequest
		want         []bool // Lease of each op sent to the store, in order
	}{
		{"unset, global off", false, false, false, request("l", desc("unset", "a")), []bool{false}},
		{"unset, global on", true, false, false, request("l", desc("unset", "a")), []bool{true}},
		{"lease: true, global off", false, false, false, request("l", desc("on", "a")), []bool{true}},
		{"lease: false, global on", true, false, false, request("l", desc("off", "a")), []bool{false}},
		{"sliding_log, global on", true, false, false, request("l", desc("log", "a")), []bool{false}},
		{"stepped token_bucket, global on", true, false, false, request("l", desc("stepped", "a")), []bool{false}},
		{"zero limit, global on", true, false, false, request("l", desc("zero", "a")), []bool{false}},
		{"shadow_mode rule", true, false, false, request("l", desc("shadow", "a")), []bool{false}},
		{"quota_mode rule", true, false, false, request("l", desc("quota", "a")), []bool{false}},
		{"SHADOW_MODE", true, true, false, request("l", desc("on", "a"), desc("unset", "a")), []bool{false, false}},
		{"QUOTA_MODE", true, false, true, request("l", desc("on", "a"), desc("unset", "a")), []bool{false, false}},
		{"usage", true, false, false, request("l", usage(desc("on", "a")), desc("unset", "a")), []bool{false, true}},
		{"a refund reaches the backend through the lease store", true, false, false, request("l", refund(desc("on", "a")), refund(desc("shadow", "a"))), []bool{true, true}},
		{"a check is an admission of 0 hits: the store decides", false, false, false, request("l", withHits(desc("on", "a"), 0)), []bool{true}},
		{"each limit of rate_limits, global on", true, false, false, request("l", desc("several", "a")), []bool{true, false}},
		{"each limit of rate_limits, global off", false, false, false, request("l", desc("several", "a")), []bool{false, false}},
		{"rate_limits with lease: true", false, false, false, request("l", desc("several_on", "a")), []bool{true, true}},
		{"mixed request", false, false, false, request("l", desc("on", "a"), desc("unset", "a"), desc("off", "a")), []bool{true, false, false}},
		{"a request's own limit follows LEASE_ENABLED", true, false, false,
			request("l", withOverride(desc("nomatch", "a"), 10, typev3.RateLimitUnit_SECOND)), []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := &fakeStore{}
			svc := ratelimit.New(staticConfig{cfg}, fs,
				ratelimit.WithLease(tt.global), ratelimit.WithShadowMode(tt.globalShadow), ratelimit.WithQuotaMode(tt.globalQuota))
			if _, err := svc.ShouldRateLimit(context.Background(), tt.req); err != nil {
				t.Fatal(err)
			}
			calls := fs.takes()
			if len(calls) != 1 {
				t.Fatalf("%d Take calls, want 1", len(calls))
			}
			var got []bool
			for _, op := range calls[0] {
				got = append(got, op.Lease)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Lease of each op %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("Lease of each op %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}
