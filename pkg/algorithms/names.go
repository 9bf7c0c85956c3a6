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

// usedMeans says what the counters API's used (Capacity − Remaining) is of a's
// counters, for its documentation.
func (a Algorithm) usedMeans() string {
	s, _ := a.lookup()
	return s.used
}

// namesOf names, in declaration order, the algorithms for which has holds
// (say Info.Bucket) as a list for messages, "a, b and c", so that a
// message about an option stays true when an algorithm is added.
func namesOf(has func(Algorithm) bool) string {
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
// Nor does a window of calendar months whose ResetAfter lags (Info.ResetLag,
// sliding_window): a replica finds its window's end ResetLag periods
// before ResetAfter, and a calendar month is not one Period long.
func (l Limit) Leasable() bool {
	s, ok := l.Algorithm.lookup()
	return ok && s.lease != noLease && l.Requests > 0 && l.RefillInterval == 0 && l.MaxDebt == 0 &&
		(!l.Calendar || s.lag == 0) && l.Validate() == nil
}

// recordsAtZero reports whether l records hits past a limit of zero
// requests (CountsAtZero); every algorithm records past a limit above zero.
func (l Limit) recordsAtZero() bool {
	return l.Requests > 0 || l.Algorithm.Info().CountsAtZero
}
