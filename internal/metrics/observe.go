package metrics

import (
	"strings"
	"unsafe"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/envoystats"
)

// Hit is one descriptor's decision, as the service saw it.
type Hit struct {
	// Rule is the descriptor's rule: its stats key is the rule's StatKey,
	// or its MetricKey of Entries (detailed_metric, value_to_metric, a
	// request's own limit). Without a Rule, Domain, StatKey and MetricKey
	// say it.
	Rule    *config.Rule
	Entries []config.Entry
	Domain  string
	// StatKey is the rule's stats key; MetricKey is the request's own key
	// (equal to StatKey unless the rule has detailed_metric/value_to_metric).
	StatKey, MetricKey string
	Hits               uint64
	// Shadow: the rule's shadow_mode or the global SHADOW_MODE;
	// RuleShadow: the rule's own (envoyproxy's shadow_mode stat counts
	// only that).
	Allowed, Shadow, RuleShadow bool
	FromCache                   bool
	// CachedDenial: the local cache held the denial, though the backend
	// decided the request (store.Result.CachedDenial); envoyproxy's
	// over_limit_with_local_cache counts it, ratelimitd's own does not.
	CachedDenial bool
	// Local: an on_store_error: local rule decided in this replica's
	// memory (ratelimitd_local_decisions_total).
	Local bool
	// Usage: the hits were usage, recorded whatever the decision.
	Usage bool
	// Charged: the store charged the hits, so Remaining is after them (the
	// request was admitted, or the hits were usage). An uncharged decision's
	// Remaining is what was left before it.
	Charged bool
	// Capacity and Remaining drive near_limit; RemainingBefore is the
	// store's for a denial recorded past the limit (what was left before
	// its hits).
	Capacity, Remaining, RemainingBefore uint64
}

// before is the counter's count before the hits, as envoyproxy's limiter
// reads it. A decision recorded past its limit (usage, shadow and quota
// rules of an admitted request) reports nothing left after it, and what
// was left before it as RemainingBefore.
func (h *Hit) before() uint64 {
	used := h.Capacity - min(h.Remaining, h.Capacity)
	switch {
	case h.Charged && h.Allowed:
		return used - min(h.Hits, used)
	case h.Charged:
		return h.Capacity - min(h.RemainingBefore, h.Capacity)
	default:
		return used
	}
}

// Observe counts one descriptor's hits.
func (m *Metrics) Observe(h Hit) {
	c := m.countersOf(&h)
	hits := float64(h.Hits)
	if c.envoy != nil {
		m.envoy.Count(c.envoy, envoystats.Decision{Hits: h.Hits, Limit: h.Capacity, Before: h.before(),
			Over: !h.Allowed, FromCache: h.FromCache || (h.CachedDenial && !h.Allowed), Shadow: h.RuleShadow})
	}
	c.total.Add(hits)
	if h.Local {
		m.localDecision(&h)
	}
	if !h.Allowed {
		c.over.Add(hits)
		if h.Shadow {
			c.shadow.Add(hits)
		}
		if h.FromCache {
			c.overCache.Add(hits)
		}
		if h.Usage {
			c.usageOver.Add(hits)
		}
		return
	}
	c.within.Add(hits)
	threshold := uint64(float64(h.Capacity) * m.nearRatio)
	if used := h.Capacity - min(h.Remaining, h.Capacity); used > threshold {
		c.near.Add(float64(min(h.Hits, used-threshold)))
	}
}

// Refund counts hits given back to the counter of rule (a negative
// hits_addend): ratelimitd_negative_hits_total, and envoyproxy's
// total_negative_hits. A refund counts in no other stat.
func (m *Metrics) Refund(rule *config.Rule, entries []config.Entry, hits uint64) {
	c := m.countersOf(&Hit{Rule: rule, Entries: entries})
	c.negative.Add(float64(hits))
	if c.envoy != nil {
		c.envoy.Refund(hits)
	}
}

// countersOf finds a hit's counters: a rule's own, built once and kept on
// the rule, or (keys that depend on the request) by its key, looked up in
// a buffer of the stack so that nothing is allocated once they exist.
func (m *Metrics) countersOf(h *Hit) *ruleCounters {
	r := h.Rule
	if r == nil {
		return m.counters(h.Domain, h.StatKey, h.MetricKey, h.MetricKey != h.StatKey)
	}
	if c, ok := r.Observed().(*ruleCounters); ok && c.owner == m {
		return c
	}
	if !r.MetricKeyVaries() {
		c := m.counters(r.Domain, r.StatKey, r.StatKey, false)
		r.SetObserved(c)
		return c
	}
	var buf [256]byte
	key := r.AppendMetricKey(buf[:0], h.Entries)
	// A request's own limit has a key made of its entries even when it
	// equals its StatKey.
	derived := r.FromRequest() || string(key) != r.StatKey
	return m.counters(r.Domain, r.StatKey, unsafe.String(unsafe.SliceData(key), len(key)), derived)
}

// counters returns the counters of label (a stats key), creating them on
// first use. label may alias a caller's buffer: it is copied before it is
// kept. A derived label (from request values) counts against the cap on
// such series; past it, hits count under "<statKey>_overflow".
func (m *Metrics) counters(domain, statKey, label string, derived bool) *ruleCounters {
	if v, ok := m.rules.Load(ruleKey{domain, label}); ok {
		return v.(*ruleCounters)
	}
	if derived && m.detailed.Load() >= m.maxDetailed {
		return m.overflow(domain, statKey)
	}
	// A variable of its own: label must not escape, or its buffer would.
	owned := strings.Clone(label)
	if derived && m.detailed.Add(1) > m.maxDetailed {
		m.detailed.Add(-1)
		return m.overflow(domain, statKey)
	}
	c := m.newCounters(domain, owned)
	if prev, loaded := m.rules.LoadOrStore(ruleKey{domain, owned}, c); loaded {
		if derived {
			m.detailed.Add(-1) // another goroutine created it first
		}
		return prev.(*ruleCounters)
	}
	return c
}

// overflow returns the counters of a rule's request-derived keys past the
// cap, kept by the rule's stats key so that an attacker's unique values
// cost a lookup, not a string.
func (m *Metrics) overflow(domain, statKey string) *ruleCounters {
	if v, ok := m.overflows.Load(ruleKey{domain, statKey}); ok {
		return v.(*ruleCounters)
	}
	c := m.newCounters(domain, statKey+"_overflow")
	prev, _ := m.overflows.LoadOrStore(ruleKey{strings.Clone(domain), strings.Clone(statKey)}, c)
	return prev.(*ruleCounters)
}

func (m *Metrics) newCounters(domain, label string) *ruleCounters {
	// WithLabelValues panics on invalid UTF-8; gRPC and protojson reject
	// such strings, but Observe must not depend on its caller's decoder.
	dl, ll := strings.ToValidUTF8(domain, "\uFFFD"), strings.ToValidUTF8(label, "\uFFFD")
	c := &ruleCounters{
		owner:     m,
		total:     m.totalHits.WithLabelValues(dl, ll),
		over:      m.overLimit.WithLabelValues(dl, ll),
		near:      m.nearLimit.WithLabelValues(dl, ll),
		within:    m.withinLimit.WithLabelValues(dl, ll),
		shadow:    m.shadowMode.WithLabelValues(dl, ll),
		overCache: m.overLimitLocalCache.WithLabelValues(dl, ll),
		usageOver: m.usageOverLimit.WithLabelValues(dl, ll),
		negative:  m.negativeHits.WithLabelValues(dl, ll),
	}
	if m.envoy != nil {
		c.envoy = m.envoy.Rule(ll)
	}
	return c
}
