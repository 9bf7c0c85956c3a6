package scripts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// opBytes is one op in the take's ARGV: eight little-endian binary64
// (lua/limit.lua's OP_FORMAT).
const opBytes = 64

// usageFlag is added to an op's mode in the take's ARGV when its hits are
// usage (algorithms.Op.Usage): lua/take.lua records them past the limit.
const usageFlag = 16

// joinedFlag is added to an op's mode in the take's ARGV when the op is
// Joined to the one before it (algorithms.Op.Joined): lua/take.lua counts a
// run of joined quota ops as one alternative.
const joinedFlag = 32

// maxHits bounds the hits sent to Lua: any hits above every capacity is
// denied with RetryAfter Never whatever its value, so clamping keeps uint64
// requests exact in binary64 without changing a decision.
const maxHits = 4 * algorithms.MaxCount

// Encode builds the KEYS and ARGV of one take: ARGV[1] is now in µs (0 =
// Redis TIME), ARGV[2] every op packed, opBytes each: its algorithm (0 for a
// limit that fails Validate, which the script denies like algorithms.Take
// does), requests, period µs, burst, refill interval µs, max debt, hits and
// mode (algorithms.Mode, an unknown one as Enforce, plus usageFlag for
// usage and joinedFlag for an op joined to the one before it). One binary argument instead of eight decimal ones
// per op saves formatting here, and argument handling and tonumber in Redis.
func Encode(ops []algorithms.Op, now time.Time) ([]string, []any, error) {
	us, err := nowArg(now)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(ops))
	buf := make([]byte, 0, opBytes*len(ops))
	for i, op := range ops {
		keys[i] = op.Key
		buf = appendOp(buf, op)
	}
	return keys, []any{us, string(buf)}, nil
}

// appendOp packs op as lua/limit.lua's op_of reads it. Every field is an
// integer below 2^53 (Validate bounds the limit, maxHits the hits), which
// binary64 holds exactly.
func appendOp(buf []byte, op algorithms.Op) []byte {
	var f [8]float64
	if lim := op.Limit; lim.Validate() == nil {
		f = [8]float64{
			float64(lim.Algorithm),
			float64(lim.Requests),
			float64(lim.Period.Microseconds()),
			float64(lim.Burst),
			float64(refillField(lim)),
			float64(lim.MaxDebt),
		}
	}
	mode := float64(op.Mode)
	if op.Mode > algorithms.NegativeHits {
		// algorithms.TakeAll reads an unknown mode as Enforce; so must the
		// script, and a mode of usageFlag or more would read as the flags.
		mode = float64(algorithms.Enforce)
	}
	if op.Usage {
		mode += usageFlag
	}
	if op.Joined {
		mode += joinedFlag
	}
	f[6], f[7] = float64(min(op.Hits, maxHits)), mode
	for _, v := range f {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
	}
	return buf
}

// appendLimit appends the 6 limit fields limit.lua reads: algorithm (0 for
// a limit that fails Validate), requests, period µs, burst, refill interval
// µs, max debt.
func appendLimit(args []any, lim algorithms.Limit) []any {
	if lim.Validate() != nil {
		return append(args, 0, 0, 0, 0, 0, 0)
	}
	return append(args,
		uint8(lim.Algorithm),
		lim.Requests,
		lim.Period.Microseconds(),
		lim.Burst,
		refillField(lim),
		lim.MaxDebt,
	)
}

// refillField is the refill interval in µs, or for a window of calendar
// months (Limit.Calendar, whose algorithms have no refill interval) the
// months (lua/calendar.lua).
func refillField(lim algorithms.Limit) int64 {
	if lim.Calendar {
		return lim.Months()
	}
	return lim.RefillInterval.Microseconds()
}

// nowArg is ARGV[1] of both scripts: now in µs, 0 for Redis TIME.
func nowArg(now time.Time) (int64, error) {
	if now.IsZero() {
		return 0, nil
	}
	us := now.UnixMicro()
	if us < 1 || us > algorithms.MaxUnixMicro {
		return 0, fmt.Errorf("now %s is outside the supported clock range", now.UTC().Format(time.RFC3339Nano))
	}
	return us, nil
}

// An op's code, the first of its four values in a take's reply (lua/take.lua):
// a refund that gave room back to a counter with none left is codeLifted, a
// denial recorded past the limit codeRecorded (its remaining is then what was
// left before its hits).
const (
	codeDenied = iota
	codeAllowed
	codeLifted
	codeRecorded
)

// Decode turns the script's reply into one Decision per op (the charges
// after them are DecodeCharges').
func Decode(reply any, n int) ([]algorithms.Decision, error) {
	vals, ok := valuesOf(reply)
	if !ok || vals.n < 4*n {
		return nil, fmt.Errorf("reply %T of %d values for %d ops, want %d integers", reply, vals.n, n, 4*n)
	}
	return decodeAt(vals, 0, n)
}

// decodeAt reads n decisions from vals[at:].
func decodeAt(vals values, at, n int) ([]algorithms.Decision, error) {
	out := make([]algorithms.Decision, n)
	for i := range out {
		var f [4]int64
		if err := vals.ints(at+4*i, f[:]); err != nil {
			return nil, err
		}
		if f[0] < codeDenied || f[0] > codeRecorded || f[1] < 0 || f[2] < 0 || f[3] < -1 {
			return nil, errors.New("reply has an unknown code, or a negative remaining, reset or retry")
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
		out[i] = d
	}
	return out, nil
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
