package algorithms

//go:generate go test -run TestGeneratedFilesMatchRegistry -update .

import (
	"fmt"
	"strings"
)

// Algorithm selects how a limit is enforced. Zero means unset. Its values
// index the registry below: a new algorithm is a constant here and a row
// there.
type Algorithm uint8

// The algorithms, in registry order.
const (
	FixedWindow Algorithm = iota + 1
	SlidingLog
	SlidingWindow
	TokenBucket
	LeakyBucket
	GCRA
)

// Family is the shape of an algorithm's State, and so how a store keeps it
// and how it takes a charge back (Undo). Zero means unset.
type Family uint8

const (
	// Registers: a few named integers (State.Window, Bucket, Meter or
	// Arrival); Redis keeps them packed in one string (registers.go), and
	// an undo rewrites that string.
	Registers Family = iota + 1
	// Log: State.Log, one entry per admitted request; Redis keeps a ZSET,
	// and an undo removes the entries the charge added.
	Log
	// Counter: one count of the current window (State.Window's Start and
	// Count); Redis keeps it as one integer string that INCRBY moves (the
	// count and a tag of its window, internal/scripts/lua/counter.lua), and
	// an undo decrements it, floored at 0, while its window is current.
	Counter
)

// ZeroRate is what a limit of zero requests does.
type ZeroRate uint8

const (
	// ZeroRefuses: checks are admitted, hits never (RetryAfter Never), and
	// nothing is stored or recorded: there is no rate to keep state for.
	ZeroRefuses ZeroRate = iota
	// ZeroCounts: the count is kept as at any limit, as envoyproxy keeps a
	// fixed window's: usage, shadow and quota hits are recorded past the
	// limit of 0, and the count only ever denies.
	ZeroCounts
)

// LeaseKind says whether replicas may lease blocks of an algorithm's
// counter (pkg/store/lease), and what happens to a block's unused hits.
type LeaseKind uint8

const (
	// NoLease: the algorithm's hits cannot be admitted after they were
	// charged without the bound moving (sliding_log: each entry's time is
	// its admission time).
	NoLease LeaseKind = iota
	// WindowLease: a block is hits of the window it was charged in; what a
	// replica did not use goes back to the counter (Lender.Return).
	WindowLease
	// BucketLease: a block is emission slots reserved ahead of now; unused
	// slots lapse as time passes and are never returned.
	BucketLease
)

// spec is everything the rest of the code derives from an algorithm.
type spec struct {
	// name is its config name, its Lua file's and function's name and its
	// docs section's title.
	name string
	// key is its part of a counter's store key: the name, with a suffix
	// when the stored layout changed, so that a store never reads a layout
	// it did not write (old keys expire with their window).
	key    string
	family Family
	// bucket: a capacity that refills (Limit.Burst applies); stepped: its
	// refill may step and go into debt (RefillInterval, MaxDebt apply).
	bucket  bool
	stepped bool
	// lease: whether and how replicas may lease blocks of a counter
	// (pkg/store/lease; see Limit.Leasable); lag: see Algorithm.ResetLag.
	lease LeaseKind
	lag   int64
	zero  ZeroRate
	// calendar: its windows may be calendar months (Limit.Calendar).
	calendar bool
	// used is what the counters API's used (Limit.Used) is of a counter.
	used string
	take func(Limit, State, uint64, int64) (Decision, State)
	// force charges hits past the limit (see Record): the state take would
	// have written had the hits fitted, bounded as its doc comment says.
	force func(Limit, State, uint64, int64) State
	undo  func(Limit, State, Charged, int64) State
	// refund gives hits back (see Refund) from a state read as Take reads
	// it, reporting whether it changed anything.
	refund func(Limit, State, uint64, int64) (State, bool)
	// horizon and valid: see Limit.Horizon and inRange.
	horizon func(Limit) int64
	valid   func(lim Limit, st State, now, horizon int64) bool
}

// registry is the one table of algorithms, indexed by Algorithm-1. What a
// new algorithm needs besides its row is listed in docs/algorithms.md ("A
// new algorithm"); tests fail until all of it exists.
var registry = [...]spec{
	FixedWindow - 1: {
		name:     "fixed_window",
		calendar: true,
		key:      "fixed_window.int",
		family:   Counter,
		lease:    WindowLease,
		zero:     ZeroCounts,
		used:     "hits admitted in the current window",
		take:     fixedWindow,
		force:    fixedWindowForce,
		undo:     fixedWindowUndo,
		refund:   fixedWindowRefund,
		horizon:  fixedWindowHorizon,
		valid:    fixedWindowValid,
	},
	SlidingLog - 1: {
		name:    "sliding_log",
		family:  Log,
		used:    "hits logged in the last period",
		take:    slidingLog,
		force:   slidingLogForce,
		undo:    slidingLogUndo,
		refund:  slidingLogRefund,
		horizon: slidingLogHorizon,
		valid:   slidingLogValid,
	},
	SlidingWindow - 1: {
		name:     "sliding_window",
		calendar: true,
		family:   Registers,
		lease:    WindowLease,
		lag:      1,
		used:     "the weighted count: this window's hits plus the previous window's, weighted by how much of it the sliding period still covers",
		take:     slidingWindow,
		force:    slidingWindowForce,
		undo:     slidingWindowUndo,
		refund:   slidingWindowRefund,
		horizon:  slidingWindowHorizon,
		valid:    slidingWindowValid,
	},
	TokenBucket - 1: {
		name:    "token_bucket",
		family:  Registers,
		bucket:  true,
		stepped: true,
		lease:   BucketLease,
		used:    "tokens missing from a full bucket (all of them while in debt)",
		take:    tokenBucket,
		force:   tokenBucketForce,
		undo:    tokenBucketUndo,
		refund:  tokenBucketRefund,
		horizon: tokenBucketHorizon,
		valid:   tokenBucketValid,
	},
	LeakyBucket - 1: {
		name:    "leaky_bucket",
		family:  Registers,
		bucket:  true,
		lease:   BucketLease,
		used:    "the meter's level",
		take:    leakyBucket,
		force:   leakyBucketForce,
		undo:    leakyBucketUndo,
		refund:  leakyBucketRefund,
		horizon: leakyBucketHorizon,
		valid:   leakyBucketValid,
	},
	GCRA - 1: {
		name:    "gcra",
		family:  Registers,
		bucket:  true,
		lease:   BucketLease,
		used:    "slots taken: `burst` − hits admissible now",
		take:    gcra,
		force:   gcraForce,
		undo:    gcraUndo,
		refund:  gcraRefund,
		horizon: gcraHorizon,
		valid:   gcraValid,
	},
}

// lookup returns a's row, or for zero and unknown values an empty one and
// ok false. It points into registry, which nothing writes: a row is a
// dozen words that Take reads several times per op, too many to copy.
func (a Algorithm) lookup() (*spec, bool) {
	if a == 0 || int(a) > len(registry) {
		return &noSpec, false
	}
	return &registry[a-1], true
}

// noSpec is the row of zero and unknown algorithms: every field zero.
var noSpec spec

// All lists every algorithm in declaration order.
func All() []Algorithm {
	out := make([]Algorithm, len(registry))
	for i := range registry {
		out[i] = Algorithm(i + 1)
	}
	return out
}

// Names lists every algorithm's config name in declaration order.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

// Valid reports whether a is a known algorithm (zero is not).
func (a Algorithm) Valid() bool {
	_, ok := a.lookup()
	return ok
}

func (a Algorithm) String() string {
	if s, ok := a.lookup(); ok {
		return s.name
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// KeyName is a's part of its counters' store keys: its name, or for an
// algorithm whose stored layout changed its name and the layout's suffix
// (fixed_window.int), so that a store never reads an older layout; empty
// for an unknown algorithm.
func (a Algorithm) KeyName() string {
	s, ok := a.lookup()
	if !ok || s.key == "" {
		return s.name
	}
	return s.key
}

// ParseKeyName maps a KeyName back to its algorithm.
func ParseKeyName(name string) (Algorithm, bool) {
	for _, a := range All() {
		if a.KeyName() == name {
			return a, true
		}
	}
	return 0, false
}

// Family is the shape of a's state; zero for an unknown algorithm.
func (a Algorithm) Family() Family {
	s, _ := a.lookup()
	return s.family
}

// Bucket reports whether a has a capacity that refills (Limit.Burst
// applies to it).
func (a Algorithm) Bucket() bool {
	s, _ := a.lookup()
	return s.bucket
}

// Stepped reports whether a refills in steps and may owe hits (Limit.
// RefillInterval and Limit.MaxDebt apply to it).
func (a Algorithm) Stepped() bool {
	s, _ := a.lookup()
	return s.stepped
}

// Calendar reports whether a's windows may be calendar months
// (Limit.Calendar applies to it).
func (a Algorithm) Calendar() bool {
	s, _ := a.lookup()
	return s.calendar
}

// Lease is how replicas may lease blocks of a's counters; NoLease for an
// unknown algorithm. Limit.Leasable also checks the limit itself.
func (a Algorithm) Lease() LeaseKind {
	s, _ := a.lookup()
	return s.lease
}

// ResetLag is how many periods a window algorithm's Decision.ResetAfter
// runs past the end of the window an admission was counted in: 0 for
// fixed_window, 1 for sliding_window (the next window still weighs the
// current one's hits). A leased block of window hits ends that much before
// ResetAfter does (pkg/store/lease).
func (a Algorithm) ResetLag() int64 {
	s, _ := a.lookup()
	return s.lag
}

// ZeroRate is what a limit of zero requests of a does; ZeroRefuses for an
// unknown algorithm.
func (a Algorithm) ZeroRate() ZeroRate {
	s, _ := a.lookup()
	return s.zero
}

// UsedMeans says what the counters API's used (Limit.Used) is of a's
// counters, for its documentation.
func (a Algorithm) UsedMeans() string {
	s, _ := a.lookup()
	return s.used
}

// Used is what the counters API reports as used of a counter that answers
// a check with d: Capacity − Remaining, never above the capacity even when
// usage took the counter past its limit (d then denies); UsedMeans says
// what that is for each algorithm.
func (l Limit) Used(d Decision) uint64 {
	c := l.Capacity()
	return c - min(d.Remaining, c)
}

// NamesOf names, in declaration order, the algorithms for which has holds
// (say Algorithm.Bucket) as a list for messages, "a, b and c", so that a
// message about an option stays true when an algorithm is added.
func NamesOf(has func(Algorithm) bool) string {
	var names []string
	for _, a := range All() {
		if has(a) {
			names = append(names, a.String())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Parse maps a config name (case-insensitive) to an Algorithm. An unknown
// name is an error, never a default.
func Parse(name string) (Algorithm, error) {
	for i, s := range registry {
		if strings.EqualFold(s.name, name) {
			return Algorithm(i + 1), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Leasable reports whether replicas may lease blocks of a counter under l
// (pkg/store/lease; "Leases" in docs/algorithms.md): a valid limit of some
// Requests whose algorithm leases, and for a stepped algorithm no
// RefillInterval or MaxDebt. Windows lease hits of the window they were
// charged in; continuous buckets lease emission slots reserved ahead.
// sliding_log does not: each entry's time is its admission time, and a hit
// admitted later from a block would leave the log early. A stepped or
// indebted token bucket is not the continuous bucket the slots assume.
// Nor does a window of calendar months whose ResetAfter lags (ResetLag,
// sliding_window): a replica finds its window's end ResetLag periods
// before ResetAfter, and a calendar month is not one Period long.
func (l Limit) Leasable() bool {
	s, ok := l.Algorithm.lookup()
	return ok && s.lease != NoLease && l.Requests > 0 && l.RefillInterval == 0 && l.MaxDebt == 0 &&
		(!l.Calendar || s.lag == 0) && l.Validate() == nil
}

// recordsAtZero reports whether l records hits past a limit of zero
// requests (ZeroCounts); every algorithm records past a limit above zero.
func (l Limit) recordsAtZero() bool {
	return l.Requests > 0 || l.Algorithm.ZeroRate() == ZeroCounts
}
