package algorithms

import (
	"fmt"
	"strings"
)

// What the rest of the code asks of an algorithm, each read off its
// registry row (registry.go).

// All lists every algorithm in declaration order.
func All() []Algorithm {
	out := make([]Algorithm, len(registry))
	for i := range registry {
		out[i] = Algorithm(i + 1)
	}
	return out
}

// names lists every algorithm's config name in declaration order.
func names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

// valid reports whether a is a known algorithm (zero is not).
func (a Algorithm) valid() bool {
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

// CountsAtZero reports whether a limit of zero requests of a keeps its
// count as at any limit (fixed_window, as envoyproxy does) rather than
// refusing every hit and keeping no state.
func (a Algorithm) CountsAtZero() bool {
	s, _ := a.lookup()
	return s.zero == zeroCounts
}

// usedMeans says what the counters API's used (Limit.Used) is of a's
// counters, for its documentation.
func (a Algorithm) usedMeans() string {
	s, _ := a.lookup()
	return s.used
}

// Used is what the counters API reports as used of a counter that answers
// a check with d: Capacity − Remaining, never above the capacity even when
// usage took the counter past its limit (d then denies); usedMeans says
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
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", name, strings.Join(names(), ", "))
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
// requests (CountsAtZero); every algorithm records past a limit above zero.
func (l Limit) recordsAtZero() bool {
	return l.Requests > 0 || l.Algorithm.CountsAtZero()
}
