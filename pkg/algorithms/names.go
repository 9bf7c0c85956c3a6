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

// recordsAtZero reports whether l records hits past a limit of zero
// requests (CountsAtZero); every algorithm records past a limit above zero.
func (l Limit) recordsAtZero() bool {
	return l.Requests > 0 || l.Algorithm.Info().CountsAtZero
}
