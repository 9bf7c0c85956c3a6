package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Return takes back each charge as algorithms.Undo does, with the undo
// script: one atomic call per Cluster slot (a script's keys must share
// one), the slot groups concurrently within ctx (capped by REDIS_TIMEOUT
// like a take), as the undo of a denied cross-slot request runs. An undo
// is not idempotent, so a call is retried only when it certainly did not
// run (see do); one that timed out may have run and is not retried: its
// hits stay charged (under-admission, never over-admission). The error
// joins every group's failure. The keys given back are published (notices):
// another replica may have cached a denial of one while the lease held them.
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
	errs := s.undoGroups(ctx, groups, now)
	s.notices.add(undoneKeys(groups, errs))
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
		return [][]scripts.Charge{charges}
	}
	idx := groupBySlot(len(charges), func(i int) string { return charges[i].Key })
	groups := make([][]scripts.Charge, len(idx))
	for g, members := range idx {
		for _, i := range members {
			groups[g] = append(groups[g], charges[i])
		}
	}
	return groups
}
