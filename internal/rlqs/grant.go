package rlqs

import (
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
)

// issue sends b a grant made of what its ledger has charged and not
// committed, as of now (ev.now): a token bucket of max_tokens M refilling
// at a rate that spends the rest by the window's end. A fresh grant
// (Envoy may start it full) spends a reporting interval's share of it on
// M; a top-up keeps M, so that Envoy carries the tokens it holds over (it
// seeds the new bucket with the old one's share of M) and only the rate
// changes.
func (st *stream) issue(ev *event, b *bucket, fresh bool) {
	s, now := st.srv, ev.now
	w := &b.win
	margin := s.set.margin
	ttl := ttlSeconds(w.end.Sub(now) - margin)
	if w.end.IsZero() || ttl < 1 {
		// The window ends before a whole-second TTL would: what was
		// charged for it lapses with it.
		s.stats.lapsed.Add(uint64(max(float64(w.charged)-w.committed, 0)))
		return
	}
	m, start := w.maxTokens, uint32(0)
	if fresh || m == 0 {
		fresh = true
		// What fits with no refill (the grant in force may refill for a
		// margin more), a reporting interval's share of it.
		room := math.Floor(float64(w.charged) + slack - w.cut(now) - w.inForce()*margin.Seconds())
		if room < 1 {
			return
		}
		burst := s.set.interval
		if b.foreign {
			// Envoy seeds it from a token bucket this ledger does not
			// know, as full as that one is (empty when used up): a
			// second's worth, the rest in refill.
			burst = time.Second
		}
		share := min(1, burst.Seconds()/w.end.Sub(now).Seconds())
		m = uint32(min(max(math.Ceil(room*share), 1), room, math.MaxUint32))
		start = m
	}
	perFill, fill, rate := encodeRate(max(w.fit(now, margin, start), 0), fillSeconds(b.horizon()))
	w.grant(now, margin, m, rate, fresh)
	b.foreign = false
	a := assignment{strategy: tokenBucket, maxTokens: m, perFill: perFill, fill: fill, nanos: s.nanos(b.sent.nanos)}
	st.assign(ev, b, a, ttl)
}

// storeFailed is a part whose store call failed. A bucket whose Envoy
// holds a grant keeps it; one that needs its first gets what its rule's
// on_store_error says (the store's breaker fails calls at once while it
// is open): allow or deny for two reporting intervals, or nothing for
// unavailable (Envoy's expired_assignment_behavior decides). Usage not
// recorded stays due: the next call records it.
func (st *stream) storeFailed(ev *event, p *part) {
	b := p.b
	if !p.v.grant || b.holds(ev.now, st.srv.set.margin) {
		return
	}
	ttl := ceilSeconds(2 * st.srv.set.interval)
	switch b.tgt.onError {
	case config.StoreErrorAllow:
		st.assign(ev, b, assignment{strategy: allowAll}, ttl)
	case config.StoreErrorDeny:
		st.assign(ev, b, assignment{strategy: denyAll}, ttl)
	}
}

// logStoreError logs a store failure at most once a second.
func (s *Server) logStoreError(err error) {
	if s.due(&s.lastErrLog, time.Second) {
		s.set.log.Warn("rlqs: the store failed; buckets that need a grant get their rules' on_store_error", zap.Error(err))
	}
}

// due reports whether a log last written at *last may be written again,
// every apart, and if so marks it written now.
func (s *Server) due(last *time.Time, every time.Duration) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(*last) < every {
		return false
	}
	*last = now
	return true
}

// warnUnserved logs, once per rule, a bucket whose rule cannot be handed
// out in grants.
func (s *Server) warnUnserved(b *bucket) {
	if b.tgt.kind != kindUnserved || b.tgt.rule == nil {
		return
	}
	s.mu.Lock()
	seen := s.warned[b.tgt.rule.Source]
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[b.tgt.rule.Source] = true
	s.mu.Unlock()
	if seen {
		return
	}
	var algs []string
	for _, r := range b.tgt.rule.Limits() {
		algs = append(algs, r.Limit.Algorithm.String())
	}
	s.set.log.Warn("rlqs: a bucket matches a rule that cannot be handed out in grants (only fixed_window and sliding_window without lease: false can); Envoy keeps its no_assignment_behavior",
		zap.String("rule", b.tgt.rule.StatKey), zap.String("source", b.tgt.rule.Source), zap.Strings("algorithms", algs))
}
