package algorithms

import "time"

// Batch is what TakeAll decided and did: each op's decision and what it
// applied, the states to write, and what an admitted batch charged.
type Batch struct {
	// Decisions holds one Decision per op, in order.
	Decisions []Decision
	// Denied is the batch's Verdict: whether it was denied.
	Denied bool
	// Applied holds, per op, what it did to its key's state, in its
	// algorithm's unit: the hits a window counted or a log logged, the
	// tokens a bucket gave, the units a meter rose, the emission intervals
	// a TAT moved. An op that fits applies its hits; one recorded past its
	// limit (usage, and Shadow and Quota ops of an admitted batch) what the
	// clamped algorithm did, which may be less, or 0 (a bucket stops at its
	// floor, a meter at twice its capacity, a TAT two bursts ahead, a count
	// at MaxCount); a refund what it gave back; anything else, and every op
	// but usage and refunds of a denied batch, 0.
	Applied []uint64
	// Writes holds the states to write: one per key that an op with hits
	// > 0 charged, a state that no longer matters at now as
	// State{ExpiresAt: 1} (see settle).
	Writes map[string]State
	// Charges is what Undo takes back to leave the keys as a denied batch
	// would have (Redis Cluster undoes a request its other slot groups
	// deny; leases give unused hits back): one per key the admitted
	// batch's other ops than usage and refunds changed, in the order the
	// batch first names them. None for a denied batch, which charged only
	// usage and refunds, and none for a key named under two limits (which
	// no config does): their units need not add up.
	Charges []Charge
}

// TakeAll decides ops as one atomic unit, the contract every store
// implements. Ops are evaluated in order, each against the state the ops
// before it left (a key named twice is judged on its running total).
// Whether the batch is denied (Batch.Denied) is the Verdict of its
// decisions.
//
// An admitted batch charges every op in full: Shadow and Quota ops and
// Usage ops are recorded past their limits (record), as envoyproxy counts
// every descriptor of a request it admits; Enforce ops were all allowed.
// A Spare op is the exception: it is charged only when it was allowed
// (its hits fit), never recorded past its limit, and never denies.
// A denied batch charges only its Usage ops (against the running total of
// the Usage ops before them): every other op is left uncharged, an allowed
// one reporting what a check would on that state, a denied one its denial
// (a denied Usage op also reports its first decision), so the decisions'
// Verdict is the batch's.
//
// Refunds (NegativeHits ops) come first: each gives its hits back (refund)
// in batch order, admitted or denied, and every other op is then decided
// as above on the refunded states, as if the batch held only them and the
// store held those states (see takeRefunded).
func TakeAll(ops []Op, load func(key string) State, now time.Time) Batch {
	if hasRefund(ops) {
		return takeRefunded(ops, load, now)
	}
	if distinctKeys(ops) {
		var writes map[string]State
		b := takeDistinct(ops, load, func(key string, st State) {
			if writes == nil {
				writes = make(map[string]State, len(ops))
			}
			writes[key] = st
		}, now, true)
		b.Writes = writes
		return b
	}
	return takeGeneral(ops, load, now)
}

// TakeAllInto is TakeAll handing each state to write to save, once per
// key and only after every call to load, instead of returning a map, and
// without the charges: a store that writes states where it keeps them
// (pkg/store/memstore) is spared building either per batch.
func TakeAllInto(ops []Op, load func(key string) State, save func(key string, st State), now time.Time) (decisions []Decision, applied []uint64) {
	if !hasRefund(ops) && distinctKeys(ops) {
		b := takeDistinct(ops, load, save, now, false)
		return b.Decisions, b.Applied
	}
	b := TakeAll(ops, load, now)
	for key, st := range b.Writes {
		save(key, st)
	}
	return b.Decisions, b.Applied
}

// firstPass decides one op in a batch's first pass, which assumes the batch
// is admitted: Usage, Shadow and Quota ops are recorded in full; Enforce
// and Spare ops only when allowed (a Spare op that does not fit is simply
// not taken, so later ops on its key see the state without it). It returns
// the decision, the state, whether it changed and what the op applied, and
// Take's decision: what the op answers if the batch turns out denied and
// the op is not Usage.
func firstPass(op Op, st State, now time.Time) (Decision, State, bool, uint64, Decision) {
	d, next := Take(op.Limit, st, op.Hits, now)
	if op.Usage || op.Mode == Shadow || op.Mode == Quota {
		rd, rnext, ch, applied := recordPast(op.Limit, op.Hits, now, d, next)
		return rd, rnext, ch, applied, d
	}
	if d.Allowed && op.Hits > 0 {
		return d, next, true, op.Hits, d
	}
	return d, next, false, 0, d
}

// newBatch allocates a batch's decisions, applied amounts and its ops'
// Take decisions (firstPass's last result) in few allocations.
func newBatch(n int) (Batch, []Decision) {
	ds := make([]Decision, 2*n)
	return Batch{Decisions: ds[:n:n], Applied: make([]uint64, n)}, ds[n:]
}

// settle is st as a batch writes it at now: a state that no longer matters
// (expired at or before now) is written in one form, expired for good, as
// take.lua deletes it. Otherwise whether a later op's Take had dropped it
// (State{}) or not (say a full bucket expiring at now) would show once the
// clock goes back.
func settle(st State, now time.Time) State {
	if st.ExpiresAt <= min(max(now.UnixMicro(), 0), maxUnixMicro) {
		return State{ExpiresAt: 1}
	}
	return st
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
