package algorithms

// The compatibility layer with Redis: a register state is three registers
// a, b and c (plus e, ExpiresAt), which the Lua take and undo scripts read
// by those letters, packed in that order in one string (and, from older
// releases, as hash fields named so). The views put their fields in this
// order:
//
//	        a      b       c
//	Window  Start  Count   Prev
//	Bucket  Last   Tokens  Frac
//	Meter   Last   Level   Frac
//	Arrival TAT    Frac    0
//
// Only code that talks to the scripts (internal/scripts) needs these two.

// Registers is st as the scripts' registers a, b and c.
func (st State) Registers() (a, b, c int64) { return st.regs[0], st.regs[1], st.regs[2] }

// FromRegisters is the State of registers a, b, c and ExpiresAt e.
func FromRegisters(a, b, c, expiresAt int64) State {
	return State{regs: [3]int64{a, b, c}, ExpiresAt: expiresAt}
}
