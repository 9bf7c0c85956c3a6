package ratelimit

import (
	"context"
	"fmt"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// take decides p's counted descriptors in exactly one store.Take. Each
// request carries its Mode, so the store itself keeps shadow_mode rules
// (and quota_mode rules while another quota rule has room) from vetoing the
// rest of the request: one round trip whatever the rules say.
func (s *Service) take(ctx context.Context, p *plan) ([]store.Result, error) {
	if len(p.reqs) == 0 {
		return nil, nil
	}
	if p.fallback {
		var cancel context.CancelFunc
		ctx, cancel = storeContext(ctx)
		defer cancel()
	}
	res, err := s.store.Take(ctx, p.reqs)
	if err != nil {
		return nil, fmt.Errorf("take %d keys: %w", len(p.reqs), err)
	}
	if len(res) != len(p.reqs) {
		return nil, fmt.Errorf("store answered %d results for %d requests", len(res), len(p.reqs))
	}
	return res, nil
}
