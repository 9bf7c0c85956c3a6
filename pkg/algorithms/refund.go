package algorithms

import "time"

// refund gives hits back to st at now under lim (a NegativeHits op: Envoy's
// is_negative_hits, returning what an estimate over-charged): never below
// the fresh state, never denied, answered as a check on the state after it
// but allowed, as envoyproxy answers a refund OK. It also says what it gave
// back (Batch.Applied; 0: it changed nothing, so a store writes nothing).
// What each algorithm gives back, and what gives nothing back:
// docs/algorithms.md#refunds.
func refund(lim Limit, st State, hits uint64, now time.Time) (Decision, State, uint64) {
	alg, read, us, ok := read(lim, st, now)
	if !ok {
		return Decision{Allowed: true}, st, 0
	}
	next, given := read, uint64(0)
	if hits > 0 && read.ExpiresAt != 0 {
		next, given = alg.refund(lim, read, min(hits, MaxCount), us)
		next = next.as(alg.family)
	}
	if given == 0 {
		next = st
	}
	d, _ := Take(lim, next, 0, now)
	d.Allowed, d.RetryAfter = true, 0
	return d, next, given
}

// hasRefund reports whether any op of a batch is a refund (NegativeHits).
func hasRefund(ops []Op) bool {
	for _, op := range ops {
		if op.Mode == NegativeHits {
			return true
		}
	}
	return false
}

// takeRefunded is TakeAll for a batch with NegativeHits ops (refunds):
// every refund first, in batch order, on the running state of its key;
// then the other ops, as TakeAll decides a batch of them alone, against
// the refunded states. A refund is written whatever the verdict; a key
// that a later op charges is written once, with that op's state.
//
// Dropping the refunds from the batch keeps its Verdict: a refund never
// denies, and ends a Quota alternative as any op of another mode does, so
// the op after it is not Joined to the one before it.
func takeRefunded(ops []Op, load func(key string) State, now time.Time) Batch {
	decisions, applied := make([]Decision, len(ops)), make([]uint64, len(ops))
	refunded := make(map[string]State, len(ops))
	changed := make(map[string]bool, len(ops))
	rest := make([]Op, 0, len(ops))
	at := make([]int, 0, len(ops))
	afterRefund := false
	for i, op := range ops {
		if op.Mode != NegativeHits {
			if afterRefund {
				op.Joined = false
			}
			rest, at, afterRefund = append(rest, op), append(at, i), false
			continue
		}
		afterRefund = true
		st, seen := refunded[op.Key]
		if !seen {
			st = load(op.Key)
		}
		decisions[i], refunded[op.Key], applied[i] = refund(op.Limit, st, op.Hits, now)
		changed[op.Key] = changed[op.Key] || applied[i] > 0
	}
	b := TakeAll(rest, func(key string) State {
		if st, ok := refunded[key]; ok {
			return st
		}
		return load(key)
	}, now)
	for j, i := range at {
		decisions[i], applied[i] = b.Decisions[j], b.Applied[j]
	}
	writes := b.Writes
	for key, ch := range changed {
		if _, charged := writes[key]; ch && !charged {
			if writes == nil {
				writes = make(map[string]State, len(changed))
			}
			writes[key] = settle(refunded[key], now)
		}
	}
	return Batch{Decisions: decisions, Denied: b.Denied, Applied: applied, Writes: writes, Charges: b.Charges}
}
