package algorithms

//go:generate go test -run TestSchemaMatchesRegistry -update-schema .

import (
	"fmt"
	"strings"
)

// Family is the shape of an algorithm's State, and so how a store keeps it.
// Zero means unset.
type Family uint8

const (
	// Registers: a few named integers (State.Window, Bucket, Meter or
	// Arrival); Redis keeps them packed in one string (registers.go).
	Registers Family = iota + 1
	// Log: State.Log, one entry per admitted request; Redis keeps a ZSET.
	Log
)

// spec is everything the rest of the code derives from an algorithm: its
// config name (also its Lua file and function name), its state family,
// whether it is a bucket with a capacity (Burst), whether its refill steps
// and may go into debt (RefillInterval, MaxDebt), its step function, and
// how to take back a charge.
type spec struct {
	name    string
	family  Family
	bucket  bool
	stepped bool
	// lag: see Algorithm.ResetLag.
	lag int64
	// lease: whether and how replicas may lease blocks of a counter
	// (pkg/store/lease; see Limit.Leasable).
	lease LeaseKind
	take  func(Limit, State, uint64, int64) (Decision, State)
	// force charges hits past the limit (see Record): the state take would
	// have written had the hits fitted, bounded as its doc comment says.
	force func(Limit, State, uint64, int64) State
	undo  func(Limit, State, Charged, int64) State
	// horizon and valid: see Limit.Horizon and inRange.
	horizon func(Limit) int64
	valid   func(lim Limit, st State, now, horizon int64) bool
}

// registry is the one table of algorithms, indexed by Algorithm-1. A new
// algorithm is a constant, a row here, its Go and Lua step functions, a
// docs section, a schema enum value and a storetest step table; tests fail
// until all of them exist.
var registry = [...]spec{
	FixedWindow - 1: {
		name:    "fixed_window",
		family:  Registers,
		lease:   WindowLease,
		take:    fixedWindow,
		force:   fixedWindowForce,
		undo:    fixedWindowUndo,
		horizon: fixedWindowHorizon,
		valid:   fixedWindowValid,
	},
	SlidingLog - 1: {
		name:    "sliding_log",
		family:  Log,
		take:    slidingLog,
		force:   slidingLogForce,
		undo:    slidingLogUndo,
		horizon: slidingLogHorizon,
		valid:   slidingLogValid,
	},
	SlidingWindow - 1: {
		name:    "sliding_window",
		family:  Registers,
		lease:   WindowLease,
		lag:     1,
		take:    slidingWindow,
		force:   slidingWindowForce,
		undo:    slidingWindowUndo,
		horizon: slidingWindowHorizon,
		valid:   slidingWindowValid,
	},
	TokenBucket - 1: {
		name:    "token_bucket",
		family:  Registers,
		bucket:  true,
		stepped: true,
		lease:   BucketLease,
		take:    tokenBucket,
		force:   tokenBucketForce,
		undo:    tokenBucketUndo,
		horizon: tokenBucketHorizon,
		valid:   tokenBucketValid,
	},
	LeakyBucket - 1: {
		name:    "leaky_bucket",
		family:  Registers,
		bucket:  true,
		lease:   BucketLease,
		take:    leakyBucket,
		force:   leakyBucketForce,
		undo:    leakyBucketUndo,
		horizon: leakyBucketHorizon,
		valid:   leakyBucketValid,
	},
	GCRA - 1: {
		name:    "gcra",
		family:  Registers,
		bucket:  true,
		lease:   BucketLease,
		take:    gcra,
		force:   gcraForce,
		undo:    gcraUndo,
		horizon: gcraHorizon,
		valid:   gcraValid,
	},
}

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

// lookup returns a's row; ok is false for zero and unknown values.
func (a Algorithm) lookup() (spec, bool) {
	if a == 0 || int(a) > len(registry) {
		return spec{}, false
	}
	return registry[a-1], true
}

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
// admitted after it was logged would leave the log early. A stepped or
// indebted token bucket is not the continuous bucket the slots assume.
func (l Limit) Leasable() bool {
	s, ok := l.Algorithm.lookup()
	return ok && s.lease != NoLease && l.Requests > 0 && l.RefillInterval == 0 && l.MaxDebt == 0 && l.Validate() == nil
}
