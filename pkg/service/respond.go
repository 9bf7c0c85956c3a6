package service

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/config"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func (s *Service) respond(p *plan, results []store.Result) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(p.slots)),
	}
	// The store decided the batch as one unit; a request is over exactly
	// when that batch was denied (shadow rules, and every rule under global
	// SHADOW_MODE, never deny it; quota rules only all together).
	if store.Verdict(p.reqs, results).Denied() {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for i, sl := range p.slots {
		switch sl.kind {
		case unlimited:
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
				Code:           rlsv3.RateLimitResponse_OK,
				LimitRemaining: math.MaxUint32,
			}
		case counted:
			resp.Statuses[i] = descriptorStatus(sl.rule, results[sl.req].Decision)
		default:
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		}
	}
	return resp
}

func descriptorStatus(r *config.Rule, d algorithms.Decision) *rlsv3.RateLimitResponse_DescriptorStatus {
	code := rlsv3.RateLimitResponse_OK
	if !d.Allowed && !r.ShadowMode {
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	limit := &rlsv3.RateLimitResponse_RateLimit{
		Name:            r.Name,
		RequestsPerUnit: r.RequestsPerUnit,
		Unit:            r.Unit,
	}
	if m := unitMultiplier(r); m > 1 {
		limit.UnitMultiplier = wrapperspb.UInt32(m)
	}
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       limit,
		LimitRemaining:     uint32(min(d.Remaining, math.MaxUint32)),
		DurationUntilReset: durationpb.New(untilReset(r.Limit.Algorithm, d.ResetAfter)),
	}
}

// untilReset reports fixed windows in whole seconds rounded up, which is
// exactly envoyproxy's unit_seconds - now%unit_seconds for windows aligned to
// the epoch; other algorithms have no such convention and keep microseconds.
func untilReset(a algorithms.Algorithm, d time.Duration) time.Duration {
	if a == algorithms.FixedWindow {
		if r := d % time.Second; r != 0 {
			d += time.Second - r
		}
		return d
	}
	return d.Truncate(time.Microsecond)
}

// unitMultiplier is how many units the rule's period spans, so a custom
// window (e.g. 30 seconds) is described truthfully in current_limit.
func unitMultiplier(r *config.Rule) uint32 {
	unit := config.UnitDuration(r.Unit)
	if unit == 0 || r.Limit.Period%unit != 0 {
		return 0
	}
	n := r.Limit.Period / unit
	if n > math.MaxUint32 {
		return 0
	}
	return uint32(n)
}
