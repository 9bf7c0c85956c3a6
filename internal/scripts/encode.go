package scripts

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// fieldsPerOp is how many ARGV integers describe one op, after ARGV[1] = now.
const fieldsPerOp = 8

// maxHits bounds the hits sent to Lua: any hits above every capacity is
// denied with RetryAfter Never whatever its value, so clamping keeps uint64
// requests exact in binary64 without changing a decision.
const maxHits = 4 * algorithms.MaxCount

// Encode builds the KEYS and ARGV of one take: ARGV[1] is now in µs (0 =
// Redis TIME), then per op algorithm (0 for a limit that fails Validate, which
// the script denies like algorithms.Take does), requests, period µs, burst,
// refill interval µs, max debt, hits and mode (algorithms.Mode).
func Encode(ops []algorithms.Op, now time.Time) ([]string, []any, error) {
	var us int64
	if !now.IsZero() {
		us = now.UnixMicro()
		if us < 1 || us > algorithms.MaxUnixMicro {
			return nil, nil, fmt.Errorf("scripts: now %s is outside the supported clock range", now.UTC().Format(time.RFC3339Nano))
		}
	}
	keys := make([]string, len(ops))
	args := make([]any, 1, 1+fieldsPerOp*len(ops))
	args[0] = us
	for i, op := range ops {
		keys[i] = op.Key
		hits := min(op.Hits, maxHits)
		lim := op.Limit
		if lim.Validate() != nil {
			args = append(args, 0, 0, 0, 0, 0, 0, hits, uint8(op.Mode))
			continue
		}
		args = append(args,
			uint8(lim.Algorithm),
			lim.Requests,
			lim.Period.Microseconds(),
			lim.Burst,
			lim.RefillInterval.Microseconds(),
			lim.MaxDebt,
			hits,
			uint8(op.Mode),
		)
	}
	return keys, args, nil
}

// Decode turns the script's reply into one Decision per op.
func Decode(reply any, n int) ([]algorithms.Decision, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 4*n {
		return nil, fmt.Errorf("scripts: reply %T of %d values for %d ops, want %d integers", reply, lenOf(reply), n, 4*n)
	}
	out := make([]algorithms.Decision, n)
	for i := range out {
		var f [4]int64
		for j := range f {
			v, ok := vals[4*i+j].(int64)
			if !ok {
				return nil, fmt.Errorf("scripts: reply value %d is %T, want an integer", 4*i+j, vals[4*i+j])
			}
			f[j] = v
		}
		if f[1] < 0 || f[2] < 0 || f[3] < -1 {
			return nil, errors.New("scripts: reply has a negative remaining, reset or retry")
		}
		d := algorithms.Decision{
			Allowed:    f[0] == 1,
			Remaining:  uint64(f[1]),
			ResetAfter: time.Duration(f[2]) * time.Microsecond,
			RetryAfter: time.Duration(f[3]) * time.Microsecond,
		}
		if f[3] == -1 {
			d.RetryAfter = algorithms.Never
		}
		out[i] = d
	}
	return out, nil
}

func lenOf(reply any) int {
	if vals, ok := reply.([]any); ok {
		return len(vals)
	}
	return 0
}
