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

// Undo takes back a charge from st, the key's state at now, for a batch
// that was charged and must now be denied (Redis Cluster decides a request's
// slot groups separately), or part of one (a lease's unused hits). It never
// leaves more room than the key would have had if the charge had never
// happened, whatever was admitted and however much time passed in between,
// and exactly that room while nothing else touched the key (in
// Limit.Canonical form: an undone state may be written otherwise):
//
//   - fixed_window: the hits leave the count only while the window that
//     counted them is current;
//   - sliding_window: they leave the window they were counted in, current or
//     previous;
//   - token_bucket, leaky_bucket, gcra: only the part of the charge that
//     refill (drain, the clock) has not already paid back is returned: a
//     bucket that filled up since forgets the charge; what is returned is
//     clamped to the bucket's bounds (gcra's charge is whole emission
//     intervals: its records past the limit move the TAT by whole ones);
//   - sliding_log: the entries the batch added are removed (a later entry
//     at the same µs still gets a fresh Seq: slidingLog numbers after the
//     highest one there).
//
// An expired state, a state of the other family, a zero charge, an
// invalid limit or a zero rate that keeps no state (ZeroRefuses) is
// returned unchanged; fixed_window's count at a limit of 0 (ZeroCounts,
// charged by shadow and quota ops) is undone as at any limit. Undo keeps ExpiresAt (but for
// sliding_log, whose newest entry may have gone): the state only ever
// matters for less time than it says.
func Undo(lim Limit, st State, ch Charged, now time.Time) State {
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	alg, ok := lim.Algorithm.lookup()
	if !ok || lim.Validate() != nil || ch.Applied == 0 || !lim.recordsAtZero() ||
		st.ExpiresAt == 0 || us >= st.ExpiresAt || !st.readableAs(alg.family) {
		return st
	}
	return alg.undo(lim, st, ch, us).As(alg.family)
}
