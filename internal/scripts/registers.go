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

// PackRegisters is the Redis string value the scripts store for a register
// state, for tools and tests that write one.
func PackRegisters(st algorithms.State) string {
	a, b, c := st.Registers()
	var buf [registersBytes]byte
	for i, v := range [4]int64{a, b, c, st.ExpiresAt} {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(float64(v)))
	}
	return string(buf[:])
}

// UnpackRegisters reads a value PackRegisters wrote, as a state of the
// Registers family (fixed_window, a Counter, reads it as absent). It
// reports false where the scripts read the key as absent: a length other
// than 32 bytes, or a number that is not an integer of magnitude at most
// 2^53.
func UnpackRegisters(v string) (algorithms.State, bool) {
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
	return algorithms.FromRegisters(regs[0], regs[1], regs[2], regs[3]).As(algorithms.Registers), true
}
