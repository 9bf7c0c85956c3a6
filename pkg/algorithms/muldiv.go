package algorithms

import (
	"math"
	"math/bits"
)

// mulAddDivMod returns floor((a*b + c)/d) and (a*b + c) mod d computed in 128
// bits, so products like elapsed*Requests never overflow. The Lua scripts
// carry the same function over their numbers (math.lua: mad, like mad
// here); both are exact wherever the quotient fits. Here a quotient that
// does not fit in 64 bits saturates at MaxUint64 (callers keep it far
// below) instead of panicking.
func mulAddDivMod(a, b, c, d uint64) (q, r uint64) {
	hi, lo := bits.Mul64(a, b)
	lo, carry := bits.Add64(lo, c, 0)
	hi += carry
	if hi >= d {
		return math.MaxUint64, 0
	}
	return bits.Div64(hi, lo, d)
}

// mulDiv returns floor(a*b/d) exactly (see mulAddDivMod); tests use it.
func mulDiv(a, b, d uint64) uint64 {
	q, _ := mulAddDivMod(a, b, 0, d)
	return q
}

// mad is mulAddDivMod over the int64 registers every algorithm keeps; its
// callers guarantee non-negative inputs, d >= 1 and a quotient below 2^53.
func mad(a, b, c, d int64) (q, r int64) {
	uq, ur := mulAddDivMod(uint64(a), uint64(b), uint64(c), uint64(d))
	return int64(min(uq, math.MaxInt64)), int64(ur)
}

// refillTime is how many µs a rate of r per p needs to add x - frac/p whole
// units (x >= 1, 0 <= frac < p): ceil((x*p - frac) / r).
func refillTime(x, frac, p, r int64) int64 {
	q, _ := mad(x-1, p, p-frac+r-1, r)
	return q
}

// ceilTo is the smallest multiple of step that is >= x (x >= 0).
func ceilTo(x, step int64) int64 {
	if step <= 1 {
		return x
	}
	if rem := x % step; rem != 0 {
		return x - rem + step
	}
	return x
}

// clamp bounds x to lo..hi (lo <= hi).
func clamp(x, lo, hi int64) int64 {
	return min(max(x, lo), hi)
}
