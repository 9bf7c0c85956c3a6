package envoystats

import (
	"math"

	gostats "github.com/lyft/gostats"
)

// Rule is one stats key's counters, built once (per rule, or per request
// value of a detailed_metric rule) so that counting a decision only adds to
// atomic counters.
type Rule struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode gostats.Counter
	overLimitWithLocalCache, totalNegativeHits               gostats.Counter
}

// Rule returns the counters of a stats key (domain.key_value.key2, as the
// config builds it, unsanitized). Asking twice for one key returns counters
// that add to the same stats. It builds names: call it once per key, not
// per request.
func (s *Stats) Rule(key string) *Rule {
	key = SanitizeKey(key)
	c := func(stat string) gostats.Counter { return s.rules.NewCounter(key + "." + stat) }
	return &Rule{
		totalHits:               c("total_hits"),
		overLimit:               c("over_limit"),
		nearLimit:               c("near_limit"),
		withinLimit:             c("within_limit"),
		shadowMode:              c("shadow_mode"),
		overLimitWithLocalCache: c("over_limit_with_local_cache"),
		totalNegativeHits:       c("total_negative_hits"),
	}
}

// Decision is one descriptor's decision as envoyproxy's limiter sees it: a
// counter that held Before hits is asked for Hits more against Limit.
type Decision struct {
	Hits, Limit, Before uint64
	// Over: the hits did not fit (the descriptor is OVER_LIMIT, or would
	// be but for shadow_mode).
	Over bool
	// FromCache: the local over-limit cache answered, without the backend.
	FromCache bool
	// Shadow is the rule's shadow_mode (not the global SHADOW_MODE).
	Shadow bool
}

// Count adds one decision to r as envoyproxy counts it, in hits: every hit
// is total_hits; of a decision over the limit only the hits past the limit
// are over_limit (and shadow_mode for a shadow rule) and the ones between
// the near-limit threshold and the limit near_limit; of one within the
// limit all are within_limit and those past the threshold near_limit. The
// threshold is floor(Limit × NEAR_LIMIT_RATIO) computed in float32, as
// envoyproxy computes it.
func (s *Stats) Count(r *Rule, d Decision) {
	h := d.Hits
	r.totalHits.Add(h)
	if d.FromCache {
		r.overLimit.Add(h)
		r.overLimitWithLocalCache.Add(h)
		if d.Shadow {
			r.shadowMode.Add(h)
		}
		return
	}
	after := d.Before + h
	if after < d.Before {
		after = math.MaxUint64
	}
	near := uint64(math.Floor(float64(float32(d.Limit) * s.nearRatio)))
	if d.Over {
		past := h
		if d.Before < d.Limit && after > d.Limit {
			past = after - d.Limit
			r.nearLimit.Add(d.Limit - max(near, d.Before))
		}
		r.overLimit.Add(past)
		if d.Shadow {
			r.shadowMode.Add(past)
		}
		return
	}
	if after > near {
		if d.Before >= near {
			r.nearLimit.Add(h)
		} else {
			r.nearLimit.Add(after - near)
		}
	}
	r.withinLimit.Add(h)
}

// Refund counts hits given back to the rule's counter (a negative
// hits_addend): total_negative_hits.
func (r *Rule) Refund(hits uint64) { r.totalNegativeHits.Add(hits) }
