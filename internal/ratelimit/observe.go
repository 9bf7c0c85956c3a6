package ratelimit

import (
	"time"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Observer receives what the service decided; *metrics.Metrics is one.
type Observer interface {
	Observe(metrics.Hit)
	Request(code string, took time.Duration)
	BackendError(kind string)
	// StoreErrorAnswer counts a request the backend failed to decide that
	// its rules' on_store_error answered: "allow" (OK) or "deny"
	// (OVER_LIMIT).
	StoreErrorAnswer(answer string)
	// ServiceError counts a request refused before the backend (malformed,
	// no config loaded).
	ServiceError()
	// GlobalShadowMode counts a request SHADOW_MODE answered OK although a
	// limit was over.
	GlobalShadowMode()
	// DomainNotFound counts the descriptors of a request whose domain no
	// config has.
	DomainNotFound(domain string, descriptors int)
	// Refund counts hits given back to the counter of rule (a negative
	// hits_addend).
	Refund(rule *config.Rule, entries []config.Entry, hits uint64)
}

// WithObserver sends per-rule counts, latencies and backend errors to obs.
func WithObserver(obs Observer) Option {
	return func(s *Service) { s.obs = obs }
}

// observe reports every counted descriptor of a decided request, and what
// the request as a whole says of the config (an unknown domain, a denial
// SHADOW_MODE let through).
func (s *Service) observe(cfg *config.Config, domain string, p *plan, results []store.Result) {
	if s.obs == nil {
		return
	}
	// A denied request charged only its usage: the other decisions report
	// what was left before them.
	denied := store.VerdictOf(p.reqs, results).Denied()
	matched := false
	for _, sl := range p.slots {
		matched = matched || sl.kind != noLimit
		if sl.kind != counted {
			continue
		}
		// A descriptor counts once, as the limit that decided it: its
		// stats key is the descriptor's, whatever its number of limits.
		r, res, req := p.rules[sl.decider], results[sl.decider], p.reqs[sl.decider]
		if req.Mode == algorithms.NegativeHits {
			s.obs.Refund(sl.rule, sl.entries, req.Hits)
			continue
		}
		s.obs.Observe(metrics.Hit{
			Rule:       sl.rule,
			Entries:    sl.entries,
			Hits:       req.Hits,
			Allowed:    res.Allowed,
			Usage:      req.Usage,
			Shadow:     sl.rule.ShadowMode || s.globalShadow,
			RuleShadow: sl.rule.ShadowMode,
			FromCache:  res.FromCache,
			// A denial the local cache held counts as envoyproxy counts a
			// local cache hit, though the backend confirmed it.
			CachedDenial: res.CachedDenial,
			Local:        res.Local && r.OnStoreError == config.StoreErrorLocal,
			Charged:      !denied || req.Usage,
			Capacity:     r.Limit.Capacity(),
			Remaining:    res.Remaining,
			// What was left before hits recorded past the limit.
			RemainingBefore: res.RemainingBefore,
		})
	}
	if s.globalShadow && wouldDeny(p, results) {
		s.obs.GlobalShadowMode()
	}
	if !matched && !cfg.HasDomain(domain) {
		s.obs.DomainNotFound(domain, len(p.slots))
	}
}

// wouldDeny reports whether the request would be OVER_LIMIT but for
// SHADOW_MODE, as envoyproxy decides it: a descriptor over its limit that
// is neither a shadow_mode nor a quota rule, or every quota descriptor over.
func wouldDeny(p *plan, results []store.Result) bool {
	quotas, quotasOver := 0, 0
	for _, sl := range p.slots {
		if sl.kind != counted || sl.rule.ShadowMode {
			continue
		}
		over := !results[sl.decider].Allowed
		if sl.quota {
			quotas++
			if over {
				quotasOver++
			}
			continue
		}
		if over {
			return true
		}
	}
	return quotas > 0 && quotas == quotasOver
}

// serviceError counts a request refused before the backend.
func (s *Service) serviceError() {
	if s.obs != nil {
		s.obs.ServiceError()
	}
}
