package scripts

import (
	"encoding/binary"
	"math"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// registersBytes is the length of a stored register state (lua/registers.lua):
// a, b, c and ExpiresAt as little-endian binary64.
const registersBytes = 32

// maxExact is the largest magnitude of an integer binary64 holds exactly.
const maxExact = 1 << 53

// The scripts keep a register state as three registers a, b and c (plus
// e, ExpiresAt) packed in this order in one string (and, from older
// releases, as hash fields named so). They are the fields of the state's
// view in order (algorithms.ViewOf: every view names the same three
// integers):
//
//	        a      b       c
//	Window  Start  Count   Prev
//	Bucket  Last   Tokens  Frac
//	Meter   Last   Level   Frac
//	Arrival TAT    Frac    0

// Registers is st as the scripts' registers a, b and c.
func Registers(st algorithms.State) (a, b, c int64) {
	w := algorithms.ViewOf[algorithms.Window](st)
	return w.Start, w.Count, w.Prev
}

// FromRegisters is the state of alg with registers a, b, c and ExpiresAt
// e, as the scripts wrote it (unmarked for alg 0: read by any algorithm
// whose state is a view).
func FromRegisters(alg algorithms.Algorithm, a, b, c, e int64) algorithms.State {
	return algorithms.StateOf(alg, algorithms.Window{Start: a, Count: b, Prev: c}, e)
}

// PackRegisters is the Redis string value the scripts store for a register
// state, for tools and tests that write one.
func PackRegisters(st algorithms.State) string {
	a, b, c := Registers(st)
	var buf [registersBytes]byte
	for i, v := range [4]int64{a, b, c, st.ExpiresAt} {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(float64(v)))
	}
	return string(buf[:])
}

// UnpackRegisters reads a value PackRegisters wrote, as a state of alg
// (0: unmarked). It
// reports false where the scripts read the key as absent: a length other
// than 32 bytes, or a number that is not an integer of magnitude at most
// 2^53.
func UnpackRegisters(alg algorithms.Algorithm, v string) (algorithms.State, bool) {
	if len(v) != registersBytes {
		return algorithms.State{}, false
	}
	var regs [4]int64
	for i := range regs {
		f := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8*i : 8*i+8])))
		if f != math.Trunc(f) || math.Abs(f) > maxExact {
			return algorithms.State{}, false
		}
		regs[i] = int64(f)
	}
	return FromRegisters(alg, regs[0], regs[1], regs[2], regs[3]), true
}
