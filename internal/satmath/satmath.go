// Package satmath is saturating arithmetic: a sum of hits or tokens that
// would overflow stops at the largest value instead of wrapping to a small
// one, which would admit what it should not.
package satmath

import (
	"math"
	"math/bits"
)

// Add is a+b, or math.MaxUint64 where that overflows.
func Add(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}
