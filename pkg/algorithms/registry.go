package algorithms

//go:generate go test -run TestGeneratedFilesMatchRegistry -update .

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

// family is the shape of an algorithm's State, and so how a store keeps it
// and how it takes a charge back (Undo). Zero means unset. The values are
// the Lua scripts' (internal/scripts generates them into the script).
type family uint8

const (
	// familyRegisters: a few named integers (a view: Window, Bucket, Meter
	// or Arrival); Redis keeps them packed in one string, and an undo
	// rewrites that string.
	familyRegisters family = iota + 1
	// familyLog: State.Log, one entry per admitted request; Redis keeps a
	// ZSET, and an undo removes the entries the charge added.
	familyLog
	// familyCounter: one count of the current window (Window's Start and
	// Count); Redis keeps it as one integer string that INCRBY moves (the
	// count and a tag of its window, internal/scripts/lua/counter.lua), and
	// an undo decrements it, floored at 0, while its window is current.
	familyCounter
)

// atZero is what a limit of zero requests does.
type atZero uint8

const (
	// zeroRefuses: checks are admitted, hits never (RetryAfter Never), and
	// nothing is stored or recorded: there is no rate to keep state for.
	zeroRefuses atZero = iota
	// zeroCounts: the count is kept as at any limit, as envoyproxy keeps a
	// fixed window's: usage, shadow and quota hits are recorded past the
	// limit of 0, and the count only ever denies.
	zeroCounts
)

// leaseKind says whether replicas may lease blocks of an algorithm's
// counter (Info.WindowLease, Info.BucketLease).
type leaseKind uint8

const (
	noLease leaseKind = iota
	windowLease
	bucketLease
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
	family family
	// bucket: a capacity that refills (Limit.Burst applies); stepped: its
	// refill may step and go into debt (RefillInterval, MaxDebt apply).
	bucket  bool
	stepped bool
	// lease: whether and how replicas may lease blocks of a counter
	// (pkg/store/lease; see lease.Leasable); lag: see Info.ResetLag.
	lease leaseKind
	lag   int64
	zero  atZero
	// calendar: its windows may be calendar months (Limit.Calendar).
	calendar bool
	// used is what the counters API's used (Capacity − Remaining) is of a counter.
	used string
	take func(Limit, State, uint64, int64) (Decision, State)
	// force charges hits past the limit (see record): the state take would
	// have written had the hits fitted, bounded as its doc comment says,
	// and what that applied (Batch.Applied).
	force func(Limit, State, uint64, int64) (State, uint64)
	undo  func(Limit, State, Charge, int64) State
	// refund gives hits back (see refund) from a state read as Take reads
	// it, reporting what it gave (0: nothing changed).
	refund func(Limit, State, uint64, int64) (State, uint64)
	// horizon and valid: see Limit.horizon and inRange.
	horizon func(Limit) int64
	valid   func(lim Limit, st State, now, horizon int64) bool
	// canonical is what a state read as Take reads it stands for at now,
	// in one form (see Limit.Canonical).
	canonical func(Limit, State, int64) State
}

// registry is the one table of algorithms, indexed by Algorithm-1. What a
// new algorithm needs besides its row is listed in docs/algorithms.md ("A
// new algorithm"); tests fail until all of it exists.
var registry = [...]spec{
	FixedWindow - 1: {
		name:      "fixed_window",
		calendar:  true,
		key:       "fixed_window.int",
		family:    familyCounter,
		lease:     windowLease,
		zero:      zeroCounts,
		used:      "hits admitted in the current window",
		take:      fixedWindow,
		force:     fixedWindowForce,
		undo:      fixedWindowUndo,
		refund:    fixedWindowRefund,
		horizon:   fixedWindowHorizon,
		valid:     fixedWindowValid,
		canonical: fixedWindowCanonical,
	},
	SlidingLog - 1: {
		name:      "sliding_log",
		family:    familyLog,
		used:      "hits logged in the last period",
		take:      slidingLog,
		force:     slidingLogForce,
		undo:      slidingLogUndo,
		refund:    slidingLogRefund,
		horizon:   slidingLogHorizon,
		valid:     slidingLogValid,
		canonical: slidingLogCanonical,
	},
	SlidingWindow - 1: {
		name:      "sliding_window",
		calendar:  true,
		family:    familyRegisters,
		lease:     windowLease,
		lag:       1,
		used:      "the weighted count: this window's hits plus the previous window's, weighted by how much of it the sliding period still covers",
		take:      slidingWindow,
		force:     slidingWindowForce,
		undo:      slidingWindowUndo,
		refund:    slidingWindowRefund,
		horizon:   slidingWindowHorizon,
		valid:     slidingWindowValid,
		canonical: slidingWindowCanonical,
	},
	TokenBucket - 1: {
		name:      "token_bucket",
		family:    familyRegisters,
		bucket:    true,
		stepped:   true,
		lease:     bucketLease,
		used:      "tokens missing from a full bucket (all of them while in debt)",
		take:      tokenBucket,
		force:     tokenBucketForce,
		undo:      tokenBucketUndo,
		refund:    tokenBucketRefund,
		horizon:   tokenBucketHorizon,
		valid:     tokenBucketValid,
		canonical: tokenBucketCanonical,
	},
	LeakyBucket - 1: {
		name:      "leaky_bucket",
		family:    familyRegisters,
		bucket:    true,
		lease:     bucketLease,
		used:      "the meter's level",
		take:      leakyBucket,
		force:     leakyBucketForce,
		undo:      leakyBucketUndo,
		refund:    leakyBucketRefund,
		horizon:   leakyBucketHorizon,
		valid:     leakyBucketValid,
		canonical: leakyBucketCanonical,
	},
	GCRA - 1: {
		name:      "gcra",
		family:    familyRegisters,
		bucket:    true,
		lease:     bucketLease,
		used:      "slots taken: `burst` − hits admissible now",
		take:      gcra,
		force:     gcraForce,
		undo:      gcraUndo,
		refund:    gcraRefund,
		horizon:   gcraHorizon,
		valid:     gcraValid,
		canonical: gcraCanonical,
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
