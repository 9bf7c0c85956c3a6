package ratelimit

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

func (s *Service) respond(p *plan, results []store.Result) *rlsv3.RateLimitResponse {
	p.decide(results)
	resp, b := newResponse(len(p.slots))
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	// The store decided the batch as one unit; a request is over exactly
	// when that batch was denied (shadow rules, and every rule under global
	// SHADOW_MODE, never deny it; quota rules only all together).
	if store.VerdictOf(p.reqs, results).Denied() {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for i, sl := range p.slots {
		st := b.status(i)
		resp.Statuses[i] = st
		switch sl.kind {
		case unlimited:
			st.Code = rlsv3.RateLimitResponse_OK
			st.LimitRemaining = math.MaxUint32
		case counted:
			// A descriptor with several limits answers with the one that
			// decided it (see plan.decide).
			r, res := p.rules[sl.decider], results[sl.decider]
			if res.Local && r.OnStoreError != config.StoreErrorLocal {
				// Its on_store_error answered, counting nothing: a code
				// alone, as when the whole request is answered so.
				st.Code = rlsv3.RateLimitResponse_OK
				if !res.Allowed && !r.ShadowMode {
					st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				}
				continue
			}
			b.describe(st, i, r, res.Decision)
		default:
			st.Code = rlsv3.RateLimitResponse_OK
		}
	}
	return resp
}

// oneDescriptor and fewDescriptors hold a response and every message it
// points to in one allocation, instead of four per descriptor: Envoy sends
// one to a few descriptors per request.
type oneDescriptor struct {
	resp     rlsv3.RateLimitResponse
	ptr      [1]*rlsv3.RateLimitResponse_DescriptorStatus
	status   [1]rlsv3.RateLimitResponse_DescriptorStatus
	limit    [1]rlsv3.RateLimitResponse_RateLimit
	duration [1]durationpb.Duration
}

const few = 4

type fewDescriptors struct {
	resp     rlsv3.RateLimitResponse
	ptr      [few]*rlsv3.RateLimitResponse_DescriptorStatus
	status   [few]rlsv3.RateLimitResponse_DescriptorStatus
	limit    [few]rlsv3.RateLimitResponse_RateLimit
	duration [few]durationpb.Duration
}

// responseParts hands out the messages of one response.
type responseParts struct {
	statuses  []rlsv3.RateLimitResponse_DescriptorStatus
	limits    []rlsv3.RateLimitResponse_RateLimit
	durations []durationpb.Duration
}

// newResponse allocates a response of slots descriptors, with a limit and
// a duration for each (indexed by descriptor: one descriptor may count
// several limits but answers with one).
func newResponse(slots int) (*rlsv3.RateLimitResponse, responseParts) {
	switch {
	case slots == 1:
		b := &oneDescriptor{}
		b.resp.Statuses = b.ptr[:]
		return &b.resp, responseParts{statuses: b.status[:], limits: b.limit[:], durations: b.duration[:]}
	case slots <= few:
		b := &fewDescriptors{}
		b.resp.Statuses = b.ptr[:slots]
		return &b.resp, responseParts{statuses: b.status[:slots], limits: b.limit[:slots], durations: b.duration[:slots]}
	}
	return &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, slots)}, responseParts{
		statuses:  make([]rlsv3.RateLimitResponse_DescriptorStatus, slots),
		limits:    make([]rlsv3.RateLimitResponse_RateLimit, slots),
		durations: make([]durationpb.Duration, slots),
	}
}

func (b responseParts) status(i int) *rlsv3.RateLimitResponse_DescriptorStatus { return &b.statuses[i] }

// describe fills st, the status of descriptor i, with decision d under
// limit r.
func (b responseParts) describe(st *rlsv3.RateLimitResponse_DescriptorStatus, i int, r *config.Rule, d algorithms.Decision) {
	st.Code = rlsv3.RateLimitResponse_OK
	if !d.Allowed && !r.ShadowMode {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	limit := &b.limits[i]
	limit.Name, limit.RequestsPerUnit, limit.Unit = r.Name, r.RequestsPerUnit, r.Unit
	if m := unitMultiplier(r); m > 1 {
		limit.UnitMultiplier = wrapperspb.UInt32(m)
	}
	st.CurrentLimit = limit
	st.LimitRemaining = uint32(min(d.Remaining, math.MaxUint32))
	reset := untilReset(r.Limit.Algorithm, d.ResetAfter)
	dur := &b.durations[i]
	dur.Seconds, dur.Nanos = int64(reset/time.Second), int32(reset%time.Second)
	st.DurationUntilReset = dur
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
