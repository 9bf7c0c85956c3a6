package ratelimit

import (
	"context"
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Bounds of the time kept back from the store for answering from
// on_store_error: a fifth of what the caller allows, so that Envoy's 20 ms
// leaves the store 16 ms (a healthy Redis answers in one) and the answer 4
// ms to be encoded and sent on a busy host.
const (
	minAnswerReserve = time.Millisecond
	maxAnswerReserve = 20 * time.Millisecond
)

// storeContext shortens the caller's deadline for a request that could be
// answered from on_store_error, so that a store hanging until the deadline
// (Redis unreachable rather than refusing connections) still leaves time to
// send that answer. Without a caller deadline the store's own timeout
// (REDIS_TIMEOUT) bounds the call and nothing is kept back.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	reserve := min(max(time.Until(deadline)/5, minAnswerReserve), maxAnswerReserve)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// storeErrorVerdict decides a request the store could not decide from its
// rules' on_store_error, with the store's verdict (algorithms.Verdict):
// unavailable and local rules count as allowing, so the request is decided
// only when it is denied whatever they would say, or when none is left.
func storeErrorVerdict(p *plan) (denied, decided bool) {
	var v algorithms.Verdict
	decided = true
	// Every limit counts with its own on_store_error (rate_limits).
	for i, r := range p.reqs {
		action := p.rules[i].OnStoreError
		decided = decided && action != config.StoreErrorUnavailable && action != config.StoreErrorLocal
		v.Add(r.Mode, r.Joined, action != config.StoreErrorDeny)
	}
	if v.Denied() {
		return true, true
	}
	return false, decided
}

// answerStoreError answers a request the store failed to decide, when its
// rules' on_store_error decide it and the caller is still waiting; ok is
// false otherwise. Nothing was counted, so the statuses carry a code and no
// current_limit, limit_remaining or reset, and no rate limit headers are
// added.
func (s *Service) answerStoreError(ctx context.Context, req *rlsv3.RateLimitRequest, p *plan, err error) (*rlsv3.RateLimitResponse, bool) {
	if !p.fallback || ctx.Err() != nil {
		return nil, false
	}
	denied, decided := storeErrorVerdict(p)
	if !decided {
		return nil, false
	}
	resp, b := newResponse(len(p.slots))
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	answer := "allow"
	if denied {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		answer = "deny"
	}
	for i, sl := range p.slots {
		st := b.status(i)
		resp.Statuses[i] = st
		st.Code = rlsv3.RateLimitResponse_OK
		switch {
		case sl.kind == unlimited:
			st.LimitRemaining = math.MaxUint32
		case sl.kind == counted:
			if j, ok := denyingLimit(p, sl); ok {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				p.slots[i].decider = j
			}
		}
	}
	s.addDynamicMetadata(req, p, resp)
	if s.obs != nil {
		s.obs.BackendError("unavailable")
		s.obs.StoreErrorAnswer(answer)
	}
	s.errLog.Warn("backend unavailable; answered from on_store_error",
		zap.String("answer", answer), zap.String("domain", req.GetDomain()), zap.Error(err))
	return resp, true
}

// denyingLimit is the first limit of counted slot sl whose on_store_error
// denies (shadow_mode rules never deny): it answers for the descriptor.
func denyingLimit(p *plan, sl slot) (int, bool) {
	for j := sl.req; j < sl.req+sl.n; j++ {
		if r := p.rules[j]; r.OnStoreError == config.StoreErrorDeny && !r.ShadowMode {
			return j, true
		}
	}
	return 0, false
}
