package algorithms

// State is the persisted state of one key; the zero State is a fresh key.
// Each algorithm reads and writes it through its family's named view:
// Window (fixed_window, sliding_window), Bucket (token_bucket), Meter
// (leaky_bucket), Arrival (gcra), or Log (sliding_log).
type State struct {
	// family is the Family of the algorithm that wrote the state (Take,
	// Record and Undo mark what they return), zero for a state built from
	// a view, which any family but Log reads as its own. Another family
	// reads it as fresh, as a store reads another layout as absent.
	family Family
	// regs holds the named fields of the register views, in the order
	// Redis keeps them (registers.go); unexported so that nothing reads
	// them by position.
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

// Window reads st as a Window.
func (st State) Window() Window {
	return Window{Start: st.regs[0], Count: st.regs[1], Prev: st.regs[2]}
}

// Bucket reads st as a Bucket.
func (st State) Bucket() Bucket {
	return Bucket{Last: st.regs[0], Tokens: st.regs[1], Frac: st.regs[2]}
}

// Meter reads st as a Meter.
func (st State) Meter() Meter { return Meter{Last: st.regs[0], Level: st.regs[1], Frac: st.regs[2]} }

// Arrival reads st as an Arrival.
func (st State) Arrival() Arrival { return Arrival{TAT: st.regs[0], Frac: st.regs[1]} }

// State is w as a State that expires at expiresAt (Unix µs).
func (w Window) State(expiresAt int64) State {
	return State{regs: [3]int64{w.Start, w.Count, w.Prev}, ExpiresAt: expiresAt}
}

// State is b as a State that expires at expiresAt (Unix µs).
func (b Bucket) State(expiresAt int64) State {
	return State{regs: [3]int64{b.Last, b.Tokens, b.Frac}, ExpiresAt: expiresAt}
}

// State is m as a State that expires at expiresAt (Unix µs).
func (m Meter) State(expiresAt int64) State {
	return State{regs: [3]int64{m.Last, m.Level, m.Frac}, ExpiresAt: expiresAt}
}

// State is a as a State that expires at expiresAt (Unix µs).
func (a Arrival) State(expiresAt int64) State {
	return State{regs: [3]int64{a.TAT, a.Frac}, ExpiresAt: expiresAt}
}

// Family is the family of the algorithm that wrote st: Log for a log,
// else the one Take, Record or Undo marked it with, zero for a state built
// from a view (read as its own by every family but Log).
func (st State) Family() Family {
	if len(st.Log) > 0 {
		return Log
	}
	return st.family
}

// As is st marked as written by family f, as a store that decodes its
// layout knows it was (a fresh state, ExpiresAt 0, stays unmarked).
func (st State) As(f Family) State {
	if st.ExpiresAt != 0 {
		st.family = f
	}
	return st
}

// readableAs reports whether an algorithm of family f reads st as its own
// state rather than a fresh one.
func (st State) readableAs(f Family) bool {
	if (f == Log) != (len(st.Log) > 0) {
		return false
	}
	return st.family == 0 || st.family == f
}
