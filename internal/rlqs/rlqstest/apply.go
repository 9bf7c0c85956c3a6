package rlqstest

import (
	"fmt"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// apply is global_client_impl.cc's onQuotaResponseImpl: each action in
// turn replaces its bucket's (a DENY_ALL wipes a token bucket), and the
// buckets are published together after the last (writeBucketsToTLS), so
// no request sees a state between two actions of one response.
func (e *Envoy) apply(it inboxItem, now time.Time) {
	for _, a := range it.resp.GetBucketAction() {
		if len(a.GetBucketId().GetBucket()) == 0 {
			continue // no id: dropped
		}
		key := idKey(a.GetBucketId().GetBucket())
		b := e.buckets[key]
		if b == nil {
			continue // an unknown bucket: dropped
		}
		if _, ok := a.GetBucketAction().(*rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_); ok {
			delete(e.buckets, key)
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		if qa == nil {
			continue
		}
		st := qa.GetRateLimitStrategy()
		var tb *tokenBucket
		switch st.GetStrategy().(type) {
		case *typev3.RateLimitStrategy_BlanketRule_:
			// A blanket rule holds no token bucket: a token bucket after it
			// starts full.
		case *typev3.RateLimitStrategy_TokenBucket:
			tb = b.tb
			if replaces(b, st) {
				tb = newTokenBucket(st.GetTokenBucket(), b.tb, now)
			}
		default:
			continue // RequestsPerTimeUnit, unset: skipped, the old action stays
		}
		b.action, b.tb, b.fallback = st, tb, false
		// startActionExpirationTimer: the TTL's seconds, its nanos dropped.
		b.expires = now.Add(time.Duration(qa.GetAssignmentTimeToLive().GetSeconds()) * time.Second)
		e.assigned[it.from] = now
	}
}

// expire is onActionExpirationTimer and onFallbackExpirationTimer: an
// action whose TTL ran out gives way to the expired behavior for its
// timeout (a token bucket fallback seeded from the held one, as any
// replacement), then to the no-assignment behavior.
func (e *Envoy) expire(b *cachedBucket, now time.Time) {
	if b.action != nil && !b.fallback && !now.Before(b.expires) {
		if e.set.Expired == nil {
			b.action, b.tb = nil, nil
			return
		}
		var tb *tokenBucket
		if p := e.set.Expired.GetTokenBucket(); p != nil {
			tb = b.tb
			if replaces(b, e.set.Expired) {
				tb = newTokenBucket(p, b.tb, now)
			}
		}
		b.action, b.tb, b.fallback = e.set.Expired, tb, true
		b.fallbackEnd = b.expires.Add(e.set.ExpiredFor.Truncate(time.Second))
	}
	if b.fallback && !now.Before(b.fallbackEnd) {
		b.action, b.tb, b.fallback = nil, nil, false
	}
}

// replaces is the filter's shouldReplaceTokenBucket: the held token bucket
// is kept when the new one's max_tokens, tokens_per_fill and
// fill_interval's nanos (not its seconds) are the same.
func replaces(b *cachedBucket, next *typev3.RateLimitStrategy) bool {
	cur, nxt := b.action.GetTokenBucket(), next.GetTokenBucket()
	if cur == nil || b.tb == nil {
		return true
	}
	return cur.GetMaxTokens() != nxt.GetMaxTokens() || cur.GetTokensPerFill().GetValue() != nxt.GetTokensPerFill().GetValue() ||
		cur.GetFillInterval().GetNanos() != nxt.GetFillInterval().GetNanos()
}

func isBlanket(s *typev3.RateLimitStrategy, r typev3.RateLimitStrategy_BlanketRule) bool {
	br, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return ok && br.BlanketRule == r
}

// Describe says how bucket id is decided now: "no bucket", "no
// assignment", or allow_all, deny_all or token_bucket(max_tokens), after
// "fallback " for the expired behavior, and "until" the TTL's end.
func (e *Envoy) Describe(id map[string]string) string {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.buckets[idKey(id)]
	if b == nil {
		return "no bucket"
	}
	e.expire(b, now)
	if b.action == nil {
		return "no assignment"
	}
	s := "token_bucket"
	switch {
	case isBlanket(b.action, typev3.RateLimitStrategy_ALLOW_ALL):
		s = "allow_all"
	case isBlanket(b.action, typev3.RateLimitStrategy_DENY_ALL):
		s = "deny_all"
	case b.action.GetTokenBucket() != nil:
		s = fmt.Sprintf("token_bucket(%d)", b.action.GetTokenBucket().GetMaxTokens())
	}
	if b.fallback {
		s = "fallback " + s
	}
	return s + " until " + b.expires.Format("05.000")
}

// Tokens is what bucket id's token bucket holds now (-1: none).
func (e *Envoy) Tokens(id map[string]string) float64 {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.buckets[idKey(id)]
	if b == nil || b.tb == nil {
		return -1
	}
	e.expire(b, now)
	if b.tb == nil {
		return -1
	}
	return b.tb.tokens(now)
}
