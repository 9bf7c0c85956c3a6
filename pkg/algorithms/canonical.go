package algorithms

import (
	"slices"
	"time"
)

// Canonical is what st stands for under l at now, in one form: the state
// read as Take reads it (expired, of another family or out of range: fresh)
// and then as its algorithm sees it at now (a bucket refilled, a window's
// counts of the current and the previous window, a log's entries still in
// the period). Two states whose Canonical forms are Equal decide every op
// from now on alike, however differently they were written: stores and
// their tests compare states so (storetest's exact case). A state that
// decides as a fresh one is the zero State; so is any state under a limit
// that fails Validate.
func (l Limit) Canonical(st State, now time.Time) State {
	alg, st, us, ok := read(l, st, now)
	if !ok || (l.Requests == 0 && !l.recordsAtZero()) {
		return State{}
	}
	return alg.canonical(l, st, us).as(alg.family)
}

// Equal reports whether st and o are the same state: the same family (a
// state built from a view has none), registers, ExpiresAt and log.
func (st State) Equal(o State) bool {
	return st.family == o.family && st.regs == o.regs && st.ExpiresAt == o.ExpiresAt && slices.Equal(st.Log, o.Log)
}
