package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// slotGroups splits reqs by Cluster slot, keeping each group in request
// order; it returns nil when every key shares one slot (always on Single and
// Sentinel), which is one script as before.
func (s *Store) slotGroups(reqs []store.Request) [][]int {
	if !s.spread || len(reqs) == 1 {
		return nil
	}
	first := Slot(reqs[0].Key)
	i := 1
	for i < len(reqs) && Slot(reqs[i].Key) == first {
		i++
	}
	if i == len(reqs) {
		return nil
	}
	return groupBySlot(len(reqs), func(j int) string { return reqs[j].Key })
}

// groupRun is one slot group's take: its ops and what its script
// answered, with the denials (what the ops report and apply if the request
// is denied: scripts.Runner.TakeDenials) and the charges.
type groupRun struct {
	ops []algorithms.Op
	out scripts.Outcome
	err error
}

// takeSpread decides a request whose counters span Cluster slots: one take
// script per slot group, concurrently, then the all-or-nothing verdict over
// every group; when it denies, each group that charged is undone of exactly
// what its script applied, so a denied request leaves every counter as a
// single node's denial would (see "Redis Cluster" in docs/redis.md for
// what an undo that fails costs). An admitted request returns every
// group's charges (TakeCharged); a denied one none, and answers for each
// op what algorithms.TakeAll answers and applies for it in a denied batch
// (its group's denials: a group that admitted its own ops otherwise
// reports them as charged), so it reads as on a single node.
func (s *Store) takeSpread(ctx context.Context, reqs []store.Request, groups [][]int, now time.Time, withCharges bool) (scripts.Outcome, error) {
	// A group's script applies the all-or-nothing rule to its own ops only.
	// Quota ops spread over several groups are decided together here, so
	// each script must charge its allowed ops whatever its own quota ops
	// got: they run as shadow ops (decided, never denying the group).
	quotaGroups := 0
	for _, g := range groups {
		for _, j := range g {
			if reqs[j].Mode == algorithms.Quota {
				quotaGroups++
				break
			}
		}
	}
	runs := make([]groupRun, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		run := &runs[gi]
		run.ops = make([]algorithms.Op, len(g))
		for k, j := range g {
			run.ops[k] = reqs[j].Op()
			if quotaGroups > 1 && run.ops[k].Mode == algorithms.Quota {
				run.ops[k].Mode = algorithms.Shadow
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.err = s.do(ctx, func(ctx context.Context) error {
				var err error
				run.out, err = s.runner.TakeDenials(ctx, s.client, run.ops, now)
				return err
			})
		}()
	}
	wg.Wait()

	out := scripts.Outcome{Decisions: make([]algorithms.Decision, len(reqs)), Applied: make([]uint64, len(reqs))}
	var errs []error
	for gi, g := range groups {
		run := &runs[gi]
		if o := run.out; run.err == nil && (len(o.Decisions) != len(g) || len(o.Denials) != len(g) || len(o.Applied) != len(g) || len(o.DeniedApplied) != len(g)) {
			run.err = fmt.Errorf("script returned %d decisions and %d denials for %d keys", len(o.Decisions), len(o.Denials), len(g))
		}
		if run.err != nil {
			errs = append(errs, run.err)
			continue
		}
		for k, j := range g {
			out.Decisions[j], out.Applied[j] = run.out.Decisions[k], run.out.Applied[k]
		}
	}
	if len(errs) > 0 {
		s.undoLate(ctx, runs, now)
		return scripts.Outcome{}, errors.Join(errs...)
	}
	var verdict algorithms.Verdict
	for i, r := range reqs {
		verdict.Add(r.Mode, r.Joined, out.Decisions[i].Allowed)
	}
	if verdict.Denied() {
		s.undo(ctx, runs, now)
		for gi, g := range groups {
			for k, j := range g {
				out.Decisions[j], out.Applied[j] = runs[gi].out.Denials[k], runs[gi].out.DeniedApplied[k]
			}
		}
		return out, nil
	}
	if withCharges {
		for _, run := range runs {
			out.Charges = append(out.Charges, run.out.Charges...)
		}
	}
	return out, nil
}

// undo takes back every group's charges, concurrently, within ctx. A
// failure leaves those hits charged (the request is still answered
// OVER_LIMIT as decided) and is reported once to the undo-failure observer.
// The keys given back are published (notices): another replica may have
// cached a denial of one while the charge stood.
func (s *Store) undo(ctx context.Context, runs []groupRun, now time.Time) {
	groups := make([][]scripts.Charge, 0, len(runs))
	for _, run := range runs {
		if run.err == nil && len(run.out.Charges) > 0 {
			groups = append(groups, run.out.Charges)
		}
	}
	errs := s.undoGroups(ctx, groups, now)
	for gi, err := range errs {
		if err != nil && s.undoFailed != nil {
			s.undoFailed(len(groups[gi]), fmt.Errorf("redisstore: %w", err))
		}
	}
	s.notices.add(undoneKeys(groups, errs))
}

// undoneKeys is the keys of the groups whose undo succeeded.
func undoneKeys(groups [][]scripts.Charge, errs []error) []string {
	var keys []string
	for gi, g := range groups {
		if errs[gi] == nil {
			for _, ch := range g {
				keys = append(keys, ch.Key)
			}
		}
	}
	return keys
}

// undoGroups runs the undo script once per group of one slot's charges,
// the groups concurrently within ctx, retrying a call only when it
// certainly did not run (do): an undo is not idempotent. It returns each
// group's error.
func (s *Store) undoGroups(ctx context.Context, groups [][]scripts.Charge, now time.Time) []error {
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
	return errs
}

// undoLate undoes a failed request's groups: it gets no answer from Redis,
// so nothing it charged elsewhere may stay charged. What failed may be its
// deadline: the undo gets REDIS_TIMEOUT of its own, in the background, so
// the caller's answer still comes within its deadline.
func (s *Store) undoLate(ctx context.Context, runs []groupRun, now time.Time) {
	s.lateUndos.Add(1)
	go func() {
		defer s.lateUndos.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		s.undo(ctx, runs, now)
	}()
}
