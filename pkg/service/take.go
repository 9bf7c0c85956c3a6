package service

import (
	"context"
	"fmt"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// take decides p's counted descriptors in one store.Take. The store treats
// the batch as all-or-nothing, but a shadow_mode rule must not veto the
// others, nor may a quota_mode rule while another quota rule has room: when
// those are the only denials, they are dropped and the rest is taken again,
// so it is charged as if they were absent. The extra round trip happens only
// while such a rule is over its limit; each retry drops at least one
// request, so the loop ends.
func (s *Service) take(ctx context.Context, p *plan) ([]store.Result, error) {
	if len(p.reqs) == 0 {
		return nil, nil
	}
	final := make([]store.Result, len(p.reqs))
	active := make([]int, len(p.reqs))
	for i := range active {
		active[i] = i
	}
	batch := p.reqs
	for {
		res, err := s.store.Take(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("take %d keys: %w", len(batch), err)
		}
		if len(res) != len(batch) {
			return nil, fmt.Errorf("store answered %d results for %d requests", len(res), len(batch))
		}
		softDenied, hardDenied := false, false
		for j, r := range res {
			final[active[j]] = r
			if !r.Allowed {
				hardDenied = hardDenied || p.soft[active[j]] == hard
				softDenied = softDenied || p.soft[active[j]] != hard
			}
		}
		if hardDenied || !softDenied || quotaExhausted(p, final) {
			return final, nil
		}
		var next []int
		for j, idx := range active {
			if res[j].Allowed {
				next = append(next, idx)
			}
		}
		if len(next) == 0 {
			return final, nil
		}
		active = next
		batch = make([]store.Request, len(active))
		for j, idx := range active {
			batch[j] = p.reqs[idx]
		}
	}
}

// quotaExhausted reports whether the request has quota rules and all of
// them are over: the request is then over the limit, and nothing is charged.
func quotaExhausted(p *plan, results []store.Result) bool {
	found := false
	for i, soft := range p.soft {
		if soft != quota {
			continue
		}
		if results[i].Allowed {
			return false
		}
		found = true
	}
	return found
}
