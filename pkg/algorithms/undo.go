package algorithms

import "time"

// Undo takes back charge c (under c.Limit) from st, the key's state at now: a batch that
// Redis Cluster decided per slot group and must now deny, or a lease's
// unused hits. It never leaves more room than if the charge had not
// happened, and exactly that room while nothing else touched the key (in
// Limit.Canonical form); what each algorithm returns after time passed, and
// which states it leaves unchanged: docs/algorithms.md#undoing-a-charge.
func Undo(st State, c Charge, now time.Time) State {
	lim := c.Limit
	us := min(max(now.UnixMicro(), 0), maxUnixMicro)
	alg, ok := lim.Algorithm.lookup()
	if !ok || lim.Validate() != nil || c.Applied == 0 || !lim.recordsAtZero() ||
		st.ExpiresAt == 0 || us >= st.ExpiresAt || !st.readableAs(alg.family) {
		return st
	}
	return alg.undo(lim, st, c, us).as(alg.family)
}
