package algorithms

// State is the persisted state of one key; the zero State is a fresh key.
// Each algorithm reads and writes it through its named view (ViewOf,
// StateOf): Window (fixed_window, sliding_window), Bucket (token_bucket),
// Meter (leaky_bucket), Arrival (gcra), or Log (sliding_log).
type State struct {
	// family is the family of the algorithm that wrote the state (Take,
	// record and Undo mark what they return, StateOf what it builds), zero
	// for a fresh state. Another family reads it as fresh, as a store reads
	// another layout as absent.
	family family
	// regs holds the named fields of the register views (ViewOf);
	// unexported so that nothing reads them by position.
	regs [3]int64
	// Log holds sliding_log's admitted hits, oldest first.
	Log []LogEntry
	// ExpiresAt (Unix microseconds) is when the state no longer matters and
	// may be dropped; a store reads a state at or past it as the zero State.
	// Zero means a fresh state.
	ExpiresAt int64
}

// LogEntry is one admitted request in a sliding log.
type LogEntry struct {
	At   int64 // Unix microseconds
	Seq  int64 // distinguishes entries with the same At
	Hits int64
}

// Window is fixed_window's and sliding_window's state.
type Window struct {
	Start int64 // the window's start, Unix µs
	Count int64 // hits admitted in the window
	Prev  int64 // sliding_window: hits admitted in the window before it
}

// Bucket is token_bucket's state, named as golang.org/x/time/rate names its
// limiter's.
type Bucket struct {
	Last   int64 // Unix µs that refill is accounted up to
	Tokens int64 // whole tokens, negative in debt
	Frac   int64 // the next token's fraction, in 1/Period units
}

// Meter is leaky_bucket's state.
type Meter struct {
	Last  int64 // Unix µs that draining is accounted up to
	Level int64 // whole units, rounded up: the exact level is Level - Frac/Period
	Frac  int64 // the fraction of a unit already drained, in 1/Period units
}

// Arrival is gcra's state.
type Arrival struct {
	TAT  int64 // the theoretical arrival time, whole Unix µs
	Frac int64 // TAT's fraction of a µs, in 1/Requests units
}

// The register views read and write the same three registers of a State
// (internal/scripts keeps them, in this order, as Redis's a, b and c).
func (st State) window() Window {
	return Window{Start: st.regs[0], Count: st.regs[1], Prev: st.regs[2]}
}

func (st State) bucket() Bucket {
	return Bucket{Last: st.regs[0], Tokens: st.regs[1], Frac: st.regs[2]}
}

func (st State) meter() Meter { return Meter{Last: st.regs[0], Level: st.regs[1], Frac: st.regs[2]} }

func (st State) arrival() Arrival { return Arrival{TAT: st.regs[0], Frac: st.regs[1]} }

func (w Window) state(expiresAt int64) State {
	return State{regs: [3]int64{w.Start, w.Count, w.Prev}, ExpiresAt: expiresAt}
}

func (b Bucket) state(expiresAt int64) State {
	return State{regs: [3]int64{b.Last, b.Tokens, b.Frac}, ExpiresAt: expiresAt}
}

func (m Meter) state(expiresAt int64) State {
	return State{regs: [3]int64{m.Last, m.Level, m.Frac}, ExpiresAt: expiresAt}
}

func (a Arrival) state(expiresAt int64) State {
	return State{regs: [3]int64{a.TAT, a.Frac}, ExpiresAt: expiresAt}
}

// ViewOf reads st as the view V of its algorithm: Window for fixed_window
// and sliding_window, Bucket for token_bucket, Meter for leaky_bucket,
// Arrival for gcra (sliding_log's state is State.Log). Every view names
// the same three integers, in field order (Arrival's third is 0), so a
// store may keep any of these states as one view's fields and ExpiresAt,
// and restore it with StateOf.
func ViewOf[V Window | Bucket | Meter | Arrival](st State) V {
	var v V
	switch p := any(&v).(type) {
	case *Window:
		*p = st.window()
	case *Bucket:
		*p = st.bucket()
	case *Meter:
		*p = st.meter()
	case *Arrival:
		*p = st.arrival()
	}
	return v
}

// StateOf is the state of a key under algorithm a whose view (see ViewOf)
// is v and that expires at expiresAt (Unix µs): what a store restores from
// what it kept. A state with ExpiresAt 0 is a fresh one.
func StateOf[V Window | Bucket | Meter | Arrival](a Algorithm, v V, expiresAt int64) State {
	var st State
	switch v := any(v).(type) {
	case Window:
		st = v.state(expiresAt)
	case Bucket:
		st = v.state(expiresAt)
	case Meter:
		st = v.state(expiresAt)
	case Arrival:
		st = v.state(expiresAt)
	}
	if s, ok := a.lookup(); ok && s.family != familyLog {
		st = st.as(s.family)
	}
	return st
}

// as is st marked as written by family f, as a store that decodes its
// layout knows it was (a fresh state, ExpiresAt 0, stays unmarked).
func (st State) as(f family) State {
	if st.ExpiresAt != 0 {
		st.family = f
	}
	return st
}

// familyOf is the family of the algorithm that wrote st: familyLog for a
// log, else the one Take, record or Undo marked it with, zero for a state
// built from a view (read as its own by every family but familyLog).
func (st State) familyOf() family {
	if len(st.Log) > 0 {
		return familyLog
	}
	return st.family
}

// readableAs reports whether an algorithm of family f reads st as its own
// state rather than a fresh one.
func (st State) readableAs(f family) bool {
	if (f == familyLog) != (len(st.Log) > 0) {
		return false
	}
	return st.family == 0 || st.family == f
}
