package algorithms

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func bigMulAddDivMod(a, b, c, d uint64) (q, r *big.Int) {
	n := new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
	n.Add(n, new(big.Int).SetUint64(c))
	return new(big.Int).QuoRem(n, new(big.Int).SetUint64(d), new(big.Int))
}

var edgeValues = []uint64{
	0, 1, 2, 3, 7, 999, 1000, 1_000_000, 1e9, MaxCount - 1, MaxCount, MaxCount + 1,
	1<<52 - 1, 1 << 52, 1<<53 - 1, 1 << 53, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64,
	uint64(MaxPeriod.Microseconds()), uint64(maxUnixMicro),
}

func TestMulAddDivMod(t *testing.T) {
	check := func(a, b, c, d uint64) {
		t.Helper()
		q, r := mulAddDivMod(a, b, c, d)
		bq, br := bigMulAddDivMod(a, b, c, d)
		if !bq.IsUint64() {
			if q != math.MaxUint64 || r != 0 {
				t.Fatalf("mulAddDivMod(%d, %d, %d, %d) = %d, %d; want saturation", a, b, c, d, q, r)
			}
			return
		}
		if q != bq.Uint64() || r != br.Uint64() {
			t.Fatalf("mulAddDivMod(%d, %d, %d, %d) = %d, %d; want %s, %s", a, b, c, d, q, r, bq, br)
		}
	}
	for _, a := range edgeValues {
		for _, b := range edgeValues {
			for _, c := range []uint64{0, 1, math.MaxUint64} {
				for _, d := range edgeValues[1:] {
					check(a, b, c, d)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		// Random bit lengths reach every magnitude, not just ~2^63.
		a := rng.Uint64() >> rng.UintN(64)
		b := rng.Uint64() >> rng.UintN(64)
		c := rng.Uint64() >> rng.UintN(64)
		d := max(rng.Uint64()>>rng.UintN(64), 1)
		check(a, b, c, d)
	}
}

func TestMulAddDivModByZeroDoesNotPanic(t *testing.T) {
	if q, _ := mulAddDivMod(5, 7, 0, 0); q != math.MaxUint64 {
		t.Fatalf("division by zero gave %d, want saturation", q)
	}
}

func TestMulDiv(t *testing.T) {
	tests := []struct{ a, b, d, want uint64 }{
		{0, 5, 3, 0},
		{10, 10, 3, 33},
		{1e9, 31_536_000_000_000, 31_536_000_000_000, 1e9},
		// elapsed*requests of half a year at 1e9/year: 1.5768e22 > 2^64.
		{15_768_000_000_000, 1e9, 31_536_000_000_000, 5e8},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64, math.MaxUint64},
		{1 << 40, 1 << 52, 1 << 40, 1 << 52},
	}
	for _, tc := range tests {
		if got := mulDiv(tc.a, tc.b, tc.d); got != tc.want {
			t.Errorf("mulDiv(%d, %d, %d) = %d, want %d", tc.a, tc.b, tc.d, got, tc.want)
		}
	}
}

func TestRefillTimeAndCeilTo(t *testing.T) {
	tests := []struct {
		name             string
		x, frac, p, r    int64
		wantRefill       int64
		ceilX, step, got int64
	}{
		{name: "one token at 10/s", x: 1, p: 1e6, r: 10, wantRefill: 100_000},
		{name: "half accrued", x: 1, frac: 500_000, p: 1e6, r: 10, wantRefill: 50_000},
		{name: "rounds up", x: 1, p: 1e6, r: 3, wantRefill: 333_334},
		{name: "many tokens", x: 1 << 40, p: 1e6, r: 1 << 40, wantRefill: 1e6},
	}
	for _, tc := range tests {
		if got := refillTime(tc.x, tc.frac, tc.p, tc.r); got != tc.wantRefill {
			t.Errorf("%s: refillTime = %d, want %d", tc.name, got, tc.wantRefill)
		}
	}
	for _, tc := range []struct{ x, step, want int64 }{
		{0, 1, 0}, {5, 1, 5}, {5, 0, 5}, {0, 250, 0}, {1, 250, 250}, {250, 250, 250}, {251, 250, 500},
	} {
		if got := ceilTo(tc.x, tc.step); got != tc.want {
			t.Errorf("ceilTo(%d, %d) = %d, want %d", tc.x, tc.step, got, tc.want)
		}
	}
}
