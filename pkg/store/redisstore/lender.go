package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// storeCharges converts the script's charges to the store's (same fields).
func storeCharges(charges []scripts.Charge) []store.Charge {
	if len(charges) == 0 {
		return nil
	}
	out := make([]store.Charge, len(charges))
	for i, c := range charges {
		out[i] = store.Charge(c)
	}
	return out
}

// Return takes back each charge as algorithms.Undo does, with the undo
// script: one atomic call per Cluster slot (a script's keys must share
// one), the slot groups concurrently within ctx (capped by REDIS_TIMEOUT
// like a take), as the undo of a denied cross-slot request runs. An undo
// is not idempotent, so a call is retried only when it certainly did not
// run (see do); one that timed out may have run and is not retried: its
// hits stay charged (under-admission, never over-admission). The error
// joins every group's failure.
func (s *Store) Return(ctx context.Context, charges []store.Charge) error {
	if len(charges) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > s.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	var now time.Time
	if s.now != nil {
		now = s.now()
	}
	groups := returnGroups(charges, s.spread)
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[gi] = s.do(ctx, func(ctx context.Context) error {
				return s.runner.Undo(ctx, s.client, g, now)
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redisstore: return: %w", err)
	}
	return nil
}

// returnGroups splits charges by Cluster slot (Slot), in the order each
// slot first appears; without spread (Single, Sentinel) every charge goes
// in one call.
func returnGroups(charges []store.Charge, spread bool) [][]scripts.Charge {
	if !spread {
		g := make([]scripts.Charge, len(charges))
		for i, c := range charges {
			g[i] = scripts.Charge(c)
		}
		return [][]scripts.Charge{g}
	}
	var groups [][]scripts.Charge
	bySlot := make(map[int]int, 4)
	for _, c := range charges {
		slot := Slot(c.Key)
		g, ok := bySlot[slot]
		if !ok {
			g = len(groups)
			bySlot[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], scripts.Charge(c))
	}
	return groups
}
