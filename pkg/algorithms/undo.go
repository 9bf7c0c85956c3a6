package algorithms

import "time"

// Charged is what one all-or-nothing batch charged one key (Batch.Charges):
// what its ops applied there, in the algorithm's unit (Batch.Applied), and
// the state it wrote (for sliding_log, After.Log holds only the entries the
// batch added).
type Charged struct {
	Applied uint64
	After   State
}

// Undo takes back a charge from st, the key's state at now: a batch that
// Redis Cluster decided per slot group and must now deny, or a lease's
// unused hits. It never leaves more room than if the charge had not
// happened, and exactly that room while nothing else touched the key (in
// Limit.Canonical form); what each algorithm returns after time passed, and
// which states it leaves unchanged: docs/algorithms.md#undoing-a-charge.
func Undo(lim Limit, st State, ch Charged, now time.Time) State {
	us := min(max(now.UnixMicro(), 0), maxUnixMicro)
	alg, ok := lim.Algorithm.lookup()
	if !ok || lim.Validate() != nil || ch.Applied == 0 || !lim.recordsAtZero() ||
		st.ExpiresAt == 0 || us >= st.ExpiresAt || !st.readableAs(alg.family) {
		return st
	}
	return alg.undo(lim, st, ch, us).as(alg.family)
}
