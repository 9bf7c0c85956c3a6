package algorithms

// The register algorithms keep their state in State.A, B and C (Redis hash
// fields a, b and c, which the undo and the differential tests read). Each
// names them through one of these views, with the names the Lua uses.

// window is fixed_window's and sliding_window's state: the window's start
// (µs), the hits admitted in it and, for sliding_window, the hits admitted
// in the window before it.
type window struct{ start, count, prev int64 }

func windowOf(st State) window { return window{start: st.A, count: st.B, prev: st.C} }

func (w window) state(expiresAt int64) State {
	return State{A: w.start, B: w.count, C: w.prev, ExpiresAt: expiresAt}
}

// bucket is token_bucket's and leaky_bucket's state: the anchor (µs) refill
// or drain is accounted up to, the whole units (tokens, negative in debt; or
// the meter's level, rounded up) and the fraction of the next unit in
// 1/Period units.
type bucket struct{ anchor, units, frac int64 }

func bucketOf(st State) bucket { return bucket{anchor: st.A, units: st.B, frac: st.C} }

func (b bucket) state(expiresAt int64) State {
	return State{A: b.anchor, B: b.units, C: b.frac, ExpiresAt: expiresAt}
}

// arrival is gcra's state: the theoretical arrival time in whole µs and
// its fraction of a µs in 1/Requests units.
type arrival struct{ tat, frac int64 }

func arrivalOf(st State) arrival { return arrival{tat: st.A, frac: st.B} }

func (a arrival) state(expiresAt int64) State {
	return State{A: a.tat, B: a.frac, ExpiresAt: expiresAt}
}
