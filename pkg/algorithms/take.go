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
// state written by another family (State.Family: say sliding_log's log,
// the registers of sliding_window or fixed_window's counter) reads as a
// fresh one, so changing a rule's algorithm never misreads old state; so
// does a state out of its algorithm's range (see valid.go). now is clamped
// to 0..MaxUnixMicro.
func Take(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	alg, st, us, ok := read(lim, st, now)
	if !ok {
		return Decision{RetryAfter: Never}, st
	}
	d, next := alg.take(lim, st, hits, us)
	return d, next.As(alg.family)
}

// read is how Take (and Refund) read st under lim at now: the clock clamped
// to 0..MaxUnixMicro in µs, and the state as the algorithm sees it (an
// expired one, one of the other family or one out of range as fresh).
// ok is false for a limit that fails Validate (st then only expired).
func read(lim Limit, st State, now time.Time) (*spec, State, int64, bool) {
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	if st.ExpiresAt != 0 && us >= st.ExpiresAt {
		st = State{}
	}
	if lim.Validate() != nil {
		return &noSpec, st, us, false
	}
	alg, _ := lim.Algorithm.lookup() // Validate rejected unknown algorithms
	if !st.readableAs(alg.family) || (st.ExpiresAt != 0 && !inRange(alg, lim, st, us)) {
		st = State{}
	}
	return alg, st, us, true
}

// zeroRate is the decision of every algorithm whose ZeroRate is
// ZeroRefuses when Requests is 0: hits are never admitted, a check is.
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
	// Spare: hits taken only if they fit, for a lease top-up riding on a
	// request (pkg/store/lease). A Spare op never denies its batch and is
	// never recorded past its limit: an admitted batch charges it when it
	// was allowed, a denied batch never does.
	Spare
	// NegativeHits: Hits given back (Envoy's is_negative_hits), as Refund
	// gives them: never below the key's fresh state, never denied. A batch
	// applies these refunds before anything else, whatever their place in
	// it and whatever its verdict, and decides its other ops on the
	// refunded states (see TakeAll). A refund never denies its batch and
	// is never a charge (Charges, Undo): nothing takes it back.
	NegativeHits
)

// Op is one charge of Hits against Key under Limit.
type Op struct {
	Key   string
	Limit Limit
	Hits  uint64
	Mode  Mode
	// Usage says Hits were already consumed (a token count Envoy reports
	// when a response ends): they are recorded as Record does, past the
	// limit too, whatever the batch's verdict. Its decision still says
	// whether the key is within its limit afterwards, and counts in the
	// verdict by Mode.
	Usage bool
	// Joined says the op is one more limit of the descriptor of the op
	// before it (ratelimitd's rate_limits). It matters to Quota ops only:
	// a run of joined Quota ops is one quota alternative, denied when any
	// of its ops is, as a descriptor is over when any of its limits is.
	Joined bool
}

// Record applies hits to state at now under lim whatever the limit says:
// hits that fit are taken exactly as Take takes them; hits that do not are
// still recorded, taking the key past its limit (a window's count exceeds
// Requests; a bucket goes into a debt bounded as its algorithm says), and
// the decision is then a denial: what a check would answer on the state
// written (Remaining 0, RetryAfter until a check would pass again), with
// RemainingBefore what was left before the hits.
// hits == 0 records nothing: Record is Take; so does a limit of zero
// Requests of an algorithm whose ZeroRate is ZeroRefuses (it keeps no state
// at a zero rate; fixed_window, ZeroCounts, keeps its count at any limit, as
// envoyproxy does).
func Record(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	d, next, _ := record(lim, st, hits, now)
	return d, next
}

// record is Record, also saying whether it changed the state (so that a
// store writes it).
func record(lim Limit, st State, hits uint64, now time.Time) (Decision, State, bool) {
	d, next := Take(lim, st, hits, now)
	return recordPast(lim, hits, now, d, next)
}

// recordPast is record after Take decided d and returned next.
func recordPast(lim Limit, hits uint64, now time.Time, d Decision, next State) (Decision, State, bool) {
	if d.Allowed || hits == 0 || !lim.recordsAtZero() || lim.Validate() != nil {
		return d, next, d.Allowed && hits > 0
	}
	// Take returned the state as it read it (expired or out-of-range
	// states as fresh ones), which force starts from.
	alg, _ := lim.Algorithm.lookup()
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	forced := alg.force(lim, next, min(hits, MaxCount), us).As(alg.family)
	before := d.Remaining
	d, _ = alg.take(lim, forced, 0, us)
	d.Allowed, d.RemainingBefore = false, before
	return d, forced, true
}

// TakeAll decides ops as one atomic unit, the contract every store
// implements. Ops are evaluated in order, each against the state the ops
// before it left (a key named twice is judged on its running total).
// Whether the batch is denied is the Verdict of its decisions.
//
// An admitted batch charges every op in full: Shadow and Quota ops and
// Usage ops are recorded past their limits (Record), as envoyproxy counts
// every descriptor of a request it admits; Enforce ops were all allowed.
// A Spare op is the exception: it is charged only when it was allowed
// (its hits fit), never recorded past its limit, and never denies.
// A denied batch charges only its Usage ops (against the running total of
// the Usage ops before them): every other op is left uncharged, an allowed
// one reporting what a check would on that state, a denied one its denial
// (a denied Usage op also reports its first decision), so the decisions'
// Verdict is the batch's.
//
// Refunds (NegativeHits ops) come first: each gives its hits back (Refund)
// in batch order,
// admitted or denied, and every other op is then decided as above on the
// refunded states, as if the batch held only them and the store held
// those states (see takeRefunded).
//
// It returns the decisions and the states to write: one per key that an
// op with hits > 0 charged, a state that no longer matters at now as
// State{ExpiresAt: 1} (see settle).
func TakeAll(ops []Op, load func(key string) State, now time.Time) ([]Decision, map[string]State) {
	if hasRefund(ops) {
		return takeRefunded(ops, load, now)
	}
	if distinctKeys(ops) {
		var writes map[string]State
		decisions := takeDistinct(ops, load, func(key string, st State) {
			if writes == nil {
				writes = make(map[string]State, len(ops))
			}
			writes[key] = st
		}, now)
		return decisions, writes
	}
	return takeGeneral(ops, load, now)
}

// TakeAllInto is TakeAll handing each state to write to save, once per
// key and only after every call to load, instead of returning a map: a
// store that writes states where it keeps them (pkg/store/memstore) is
// spared building one per batch.
func TakeAllInto(ops []Op, load func(key string) State, save func(key string, st State), now time.Time) []Decision {
	if !hasRefund(ops) && distinctKeys(ops) {
		return takeDistinct(ops, load, save, now)
	}
	decisions, writes := TakeAll(ops, load, now)
	for key, st := range writes {
		save(key, st)
	}
	return decisions
}

// firstPass decides one op in a batch's first pass, which assumes the batch
// is admitted: Usage, Shadow and Quota ops are recorded in full; Enforce
// and Spare ops only when allowed (a Spare op that does not fit is simply
// not taken, so later ops on its key see the state without it). It returns
// the decision, the state and whether it changed, and Take's decision: what
// the op answers if the batch turns out denied and the op is not Usage.
func firstPass(op Op, st State, now time.Time) (Decision, State, bool, Decision) {
	d, next := Take(op.Limit, st, op.Hits, now)
	if op.Usage || op.Mode == Shadow || op.Mode == Quota {
		rd, rnext, ch := recordPast(op.Limit, op.Hits, now, d, next)
		return rd, rnext, ch, d
	}
	return d, next, d.Allowed && op.Hits > 0, d
}

// takeGeneral is TakeAll for any ops: a key's later ops see the pending
// state its earlier ops left.
func takeGeneral(ops []Op, load func(key string) State, now time.Time) ([]Decision, map[string]State) {
	decisions, taken := decisionPair(len(ops))
	original := make(map[string]State, len(ops))
	pending := make(map[string]State, len(ops))
	charged := make(map[string]bool, len(ops))
	var verdict Verdict
	for i, op := range ops {
		st, seen := pending[op.Key]
		if !seen {
			st = load(op.Key)
			original[op.Key] = st
		}
		var ch bool
		decisions[i], pending[op.Key], ch, taken[i] = firstPass(op, st, now)
		charged[op.Key] = charged[op.Key] || ch
		verdict.Add(op.Mode, op.Joined, decisions[i].Allowed)
	}
	if !verdict.Denied() {
		return decisions, chargedStates(charged, pending, now)
	}
	// Denied: start again from the stored states, recording usage only
	// (a usage op moves its key's running state on as in the first pass).
	// A usage op the first pass denied keeps that decision, so that the
	// verdict still reads off the decisions: with fewer hits before it its
	// record may now fit, but the request it was denied with is still over.
	clear(charged)
	running := original
	for i, op := range ops {
		switch {
		case op.Usage:
			var ch bool
			var d Decision
			d, running[op.Key], ch = record(op.Limit, running[op.Key], op.Hits, now)
			if decisions[i].Allowed {
				decisions[i] = d
			}
			charged[op.Key] = charged[op.Key] || ch
		case decisions[i].Allowed:
			decisions[i], _ = Take(op.Limit, running[op.Key], 0, now)
		default:
			decisions[i] = taken[i]
		}
	}
	return decisions, chargedStates(charged, running, now)
}

// decisionPair allocates a batch's decisions and its ops' Take decisions
// (firstPass's last result) in one go.
func decisionPair(n int) (decisions, taken []Decision) {
	ds := make([]Decision, 2*n)
	return ds[:n:n], ds[n:]
}

// chargedStates is the states of the charged keys: what a batch writes.
func chargedStates(charged map[string]bool, states map[string]State, now time.Time) map[string]State {
	var writes map[string]State
	for key, ch := range charged {
		if ch {
			if writes == nil {
				writes = make(map[string]State, len(charged))
			}
			writes[key] = settle(states[key], now)
		}
	}
	return writes
}

// settle is st as a batch writes it at now: a state that no longer matters
// (expired at or before now) is written in one form, expired for good, as
// take.lua deletes it. Otherwise whether a later op's Take had dropped it
// (State{}) or not (say a full bucket expiring at now) would show once the
// clock goes back.
func settle(st State, now time.Time) State {
	if st.ExpiresAt <= min(max(now.UnixMicro(), 0), MaxUnixMicro) {
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

// takeDistinct is TakeAll for ops on distinct keys, nearly every request:
// each op sees its key's stored state, so no op's pending state needs
// tracking by key (the Lua take's distinct-keys path mirrors it). It hands
// each state to write to save, after every load.
func takeDistinct(ops []Op, load func(key string) State, save func(key string, st State), now time.Time) []Decision {
	decisions := make([]Decision, len(ops))
	// A request carries a few descriptors: their scratch stays on the stack.
	var buf [4]distinctPass
	var pass []distinctPass
	if len(ops) > len(buf) {
		pass = make([]distinctPass, len(ops))
	} else {
		pass = buf[:len(ops)]
	}
	var verdict Verdict
	for i, op := range ops {
		p := &pass[i]
		p.original = load(op.Key)
		decisions[i], p.next, p.charged, p.taken = firstPass(op, p.original, now)
		verdict.Add(op.Mode, op.Joined, decisions[i].Allowed)
	}
	denied := verdict.Denied()
	for i, op := range ops {
		p := &pass[i]
		if denied && !op.Usage {
			if decisions[i].Allowed {
				decisions[i], _ = Take(op.Limit, p.original, 0, now)
			} else {
				decisions[i] = p.taken
			}
			continue
		}
		if p.charged {
			save(op.Key, settle(p.next, now))
		}
	}
	return decisions
}

// distinctPass is what takeDistinct's first pass leaves of one op: its
// key's stored state, the state it charged (when charged) and Take's
// decision (firstPass).
type distinctPass struct {
	original, next State
	taken          Decision
	charged        bool
}
