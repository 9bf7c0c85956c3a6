package satmath

import (
	"math"
	"testing"
)

func TestAdd(t *testing.T) {
	for _, tt := range []struct{ a, b, want uint64 }{
		{0, 0, 0},
		{1, 2, 3},
		{math.MaxUint64 - 1, 1, math.MaxUint64},
		{math.MaxUint64, 1, math.MaxUint64},
		{1 << 63, 1 << 63, math.MaxUint64},
	} {
		if got := Add(tt.a, tt.b); got != tt.want {
			t.Errorf("Add(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
