package algorithms

import (
	"math"
	"time"
)

// Never is the RetryAfter of hits that can never be admitted (more hits than
// the capacity, or a limit of zero requests).
const Never = time.Duration(math.MaxInt64)

// Take applies hits to state at now under lim. hits == 0 only checks.
// The returned state is the one to persist when the caller commits.
//
// A limit that fails Validate denies everything with RetryAfter Never. A
// state written by the other family (sliding_log's log versus the registers
// of every other algorithm) reads as a fresh one, so changing a rule's
// algorithm never misreads old state; so does a state out of its
// algorithm's range (see valid.go). now is clamped to 0..MaxUnixMicro.
func Take(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	if st.ExpiresAt != 0 && us >= st.ExpiresAt {
		st = State{}
	}
	if lim.Validate() != nil {
		return Decision{RetryAfter: Never}, st
	}
	alg, _ := lim.Algorithm.lookup() // Validate rejected unknown algorithms
	if (alg.family == Log) != (len(st.Log) > 0) || (st.ExpiresAt != 0 && !inRange(alg, lim, st, us)) {
		st = State{}
	}
	return alg.take(lim, st, hits, us)
}

// zeroRate is the decision of every algorithm but fixed_window when Requests
// is 0: hits are never admitted, a check is.
func zeroRate(st State, hits uint64) (Decision, State) {
	if hits > 0 {
		return Decision{RetryAfter: Never}, st
	}
	return Decision{Allowed: true}, st
}

// Mode says how an op's denial affects the rest of its batch. Zero means
// Enforce.
type Mode uint8

const (
	// Enforce: a denial denies the whole batch.
	Enforce Mode = iota + 1
	// Shadow: a denial denies nothing; the denied op alone is not charged
	// (envoyproxy's shadow_mode and global SHADOW_MODE).
	Shadow
	// Quota: the batch's quota ops are alternatives; they deny the batch
	// only when every one of them is denied (envoyproxy's quota_mode).
	// Deciding this here rather than sending quota ops as Shadow and
	// flipping the answer afterwards keeps all-or-nothing: a request its
	// quota rules deny charges nothing, where the flip would have charged
	// its other rules (envoyproxy charges every rule either way).
	Quota
)

// Op is one charge of Hits against Key under Limit.
type Op struct {
	Key   string
	Limit Limit
	Hits  uint64
	Mode  Mode
}

// TakeAll decides ops as one atomic, all-or-nothing unit, the contract every
// store implements. Ops are evaluated in order, each against the state the
// ops before it left (a key named twice is charged twice). Whether the batch
// is denied is the Verdict of its decisions. If the batch is allowed, it
// returns the decisions and the states to write: one per key that an
// allowed op with hits > 0 charged. If the batch is denied, nothing is
// written and each allowed op reports the unchanged state (as a check with
// zero hits would).
func TakeAll(ops []Op, load func(key string) State, now time.Time) ([]Decision, map[string]State) {
	if distinctKeys(ops) {
		return takeDistinct(ops, load, now)
	}
	return takeGeneral(ops, load, now)
}

// takeGeneral is TakeAll for any ops: a key's later ops see the pending
// state its earlier ops left.
func takeGeneral(ops []Op, load func(key string) State, now time.Time) ([]Decision, map[string]State) {
	decisions := make([]Decision, len(ops))
	original := make(map[string]State, len(ops))
	pending := make(map[string]State, len(ops))
	var verdict Verdict
	for i, op := range ops {
		st, seen := pending[op.Key]
		if !seen {
			st = load(op.Key)
			original[op.Key] = st
		}
		var next State
		decisions[i], next = Take(op.Limit, st, op.Hits, now)
		pending[op.Key] = next
		verdict.Add(op.Mode, decisions[i].Allowed)
	}
	if verdict.Denied() {
		for i, op := range ops {
			if decisions[i].Allowed {
				decisions[i], _ = Take(op.Limit, original[op.Key], 0, now)
			}
		}
		return decisions, nil
	}
	writes := make(map[string]State, len(ops))
	for i, op := range ops {
		if op.Hits > 0 && decisions[i].Allowed {
			writes[op.Key] = pending[op.Key]
		}
	}
	return decisions, writes
}

// distinctKeys reports whether no key repeats in ops. Requests carry a few
// descriptors, so comparing pairs beats building a set.
func distinctKeys(ops []Op) bool {
	if len(ops) > 16 {
		seen := make(map[string]struct{}, len(ops))
		for _, op := range ops {
			if _, dup := seen[op.Key]; dup {
				return false
			}
			seen[op.Key] = struct{}{}
		}
		return true
	}
	for i := 1; i < len(ops); i++ {
		for j := range i {
			if ops[i].Key == ops[j].Key {
				return false
			}
		}
	}
	return true
}

// takeDistinct is TakeAll for ops on distinct keys, nearly every request:
// each op sees its key's stored state, so no op's pending state needs
// tracking by key (the Lua take's distinct-keys path mirrors it).
func takeDistinct(ops []Op, load func(key string) State, now time.Time) ([]Decision, map[string]State) {
	decisions := make([]Decision, len(ops))
	states := make([]State, 2*len(ops)) // stored, then next, per op
	original, next := states[:len(ops)], states[len(ops):]
	var verdict Verdict
	for i, op := range ops {
		original[i] = load(op.Key)
		decisions[i], next[i] = Take(op.Limit, original[i], op.Hits, now)
		verdict.Add(op.Mode, decisions[i].Allowed)
	}
	if verdict.Denied() {
		for i, op := range ops {
			if decisions[i].Allowed {
				decisions[i], _ = Take(op.Limit, original[i], 0, now)
			}
		}
		return decisions, nil
	}
	var writes map[string]State
	for i, op := range ops {
		if op.Hits > 0 && decisions[i].Allowed {
			if writes == nil {
				writes = make(map[string]State, len(ops))
			}
			writes[op.Key] = next[i]
		}
	}
	return decisions, writes
}
