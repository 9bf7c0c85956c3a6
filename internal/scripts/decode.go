package scripts

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Outcome is one take's reply, decoded: per op its decision and what it
// applied (algorithms.Batch's Applied); with WithCharges an admitted
// batch's charges; with WithDenials, per op, what it answers and applied
// had the batch been denied (a denied batch's own again).
type Outcome struct {
	Decisions []algorithms.Decision
	Applied   []uint64
	Charges   []Charge
	Denials   []algorithms.Decision
	// DeniedApplied is what each op applies in a denied batch: usage and
	// refunds only.
	DeniedApplied []uint64
}

// opFields is the values per op in a take's reply (lua/take.lua): its
// code, remaining, reset µs, retry µs (-1: never) and what it applied.
const opFields = 5

// An op's code, the first of its values in a take's reply (lua/take.lua):
// a refund that gave room back to a counter with none left is codeLifted, a
// denial recorded past the limit codeRecorded (its remaining is then what was
// left before its hits).
const (
	codeDenied = iota
	codeAllowed
	codeLifted
	codeRecorded
)

// Decode reads the reply of a take of ops: the decisions and amounts
// applied, then what charges and denials say it asked for (WithCharges,
// WithDenials; denials come with the charges).
func Decode(reply any, ops []algorithms.Op, charges, denials bool) (Outcome, error) {
	vals, ok := valuesOf(reply)
	n, per := len(ops), opFields
	if denials {
		per, charges = 2*opFields, true
	}
	if !ok || vals.n < per*n {
		return Outcome{}, fmt.Errorf("reply %T of %d values for %d ops, want %d integers", reply, vals.n, n, per*n)
	}
	var out Outcome
	var err error
	if out.Decisions, out.Applied, err = decodeAt(vals, 0, n); err != nil {
		return Outcome{}, err
	}
	if denials {
		if out.Denials, out.DeniedApplied, err = decodeAt(vals, opFields*n, n); err != nil {
			return Outcome{}, fmt.Errorf("denials: %w", err)
		}
	}
	if charges {
		if out.Charges, err = decodeCharges(vals, ops, per*n); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// decodeAt reads n decisions and amounts applied from vals[at:].
func decodeAt(vals values, at, n int) ([]algorithms.Decision, []uint64, error) {
	out, applied := make([]algorithms.Decision, n), make([]uint64, n)
	for i := range out {
		var f [opFields]int64
		if err := vals.ints(at+opFields*i, f[:]); err != nil {
			return nil, nil, err
		}
		if f[0] < codeDenied || f[0] > codeRecorded || f[1] < 0 || f[2] < 0 || f[3] < -1 || f[4] < 0 {
			return nil, nil, errors.New("reply has an unknown code, or a negative remaining, reset, retry or amount applied")
		}
		d := algorithms.Decision{
			Allowed:    f[0] == codeAllowed || f[0] == codeLifted,
			Remaining:  uint64(f[1]),
			ResetAfter: time.Duration(f[2]) * time.Microsecond,
			RetryAfter: time.Duration(f[3]) * time.Microsecond,
		}
		if f[0] == codeRecorded {
			d.Remaining, d.RemainingBefore = 0, uint64(f[1])
		}
		if f[3] == -1 {
			d.RetryAfter = algorithms.Never
		}
		out[i], applied[i] = d, uint64(f[4])
	}
	return out, applied, nil
}

// values is a take's reply: the integers of a take alone, or the one
// string of little-endian binary64 (the same values) that a take merged
// into take_many gets from lua/take_fixed.lua's reply_of, which Redis
// answers for much less than an array of integers.
type values struct {
	arr    []any
	packed string
	n      int
}

func valuesOf(reply any) (values, bool) {
	switch r := reply.(type) {
	case []any:
		return values{arr: r, n: len(r)}, true
	case string:
		return values{packed: r, n: len(r) / 8}, len(r)%8 == 0
	}
	return values{}, false
}

// ints reads vals[at:at+len(f)] as integers into f.
func (v values) ints(at int, f []int64) error {
	n := len(f)
	if at+n > v.n {
		return fmt.Errorf("reply ends %d values early", at+n-v.n)
	}
	for j := range f {
		x, err := v.int(at + j)
		if err != nil {
			return err
		}
		f[j] = x
	}
	return nil
}

// int is vals[i], which must be an integer (Lua's binary64 holds every
// value a take replies exactly).
func (v values) int(i int) (int64, error) {
	if v.arr != nil {
		x, ok := v.arr[i].(int64)
		if !ok {
			return 0, fmt.Errorf("reply value %d is %T, want an integer", i, v.arr[i])
		}
		return x, nil
	}
	s := v.packed[8*i : 8*i+8]
	f := math.Float64frombits(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("reply value %d is %v, want an integer", i, f)
	}
	return int64(f), nil
}

func lenOf(reply any) int {
	if vals, ok := reply.([]any); ok {
		return len(vals)
	}
	return 0
}
