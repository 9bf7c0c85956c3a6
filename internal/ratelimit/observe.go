package ratelimit

import (
	"time"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
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
}

// WithObserver sends per-rule counts, latencies and backend errors to obs.
func WithObserver(obs Observer) Option {
	return func(s *Service) { s.obs = obs }
}

// observe reports every counted descriptor of a decided request.
func (s *Service) observe(domain string, p *plan, results []store.Result) {
	if s.obs == nil {
		return
	}
	for _, sl := range p.slots {
		if sl.kind != counted {
			continue
		}
		// A descriptor counts once, as the limit that decided it: its
		// stats key is the descriptor's, whatever its number of limits.
		r, res := p.rules[sl.decider], results[sl.decider]
		s.obs.Observe(metrics.Hit{
			Domain:    domain,
			StatKey:   r.StatKey,
			MetricKey: r.MetricKey(sl.entries),
			Hits:      p.reqs[sl.decider].Hits,
			Allowed:   res.Allowed,
			Usage:     p.reqs[sl.decider].Usage,
			Shadow:    r.ShadowMode || s.globalShadow,
			FromCache: res.FromCache,
			Capacity:  r.Limit.Capacity(),
			Remaining: res.Remaining,
		})
	}
}
