package scripts

import (
	"encoding/binary"
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
		return calendarMonths(lim)
	}
	return lim.RefillInterval.Microseconds()
}

// calendarMonths is how many calendar months one window of lim spans
// (Period/Month, algorithms.Limit.Calendar), 0 for epoch windows.
func calendarMonths(lim algorithms.Limit) int64 {
	if !lim.Calendar {
		return 0
	}
	return int64(lim.Period / algorithms.Month)
}

// maxUnixMicro is the latest clock the scripts accept: every time a state
// stores stays exact in binary64 (below 2^53 µs) for two MaxPeriods after.
const maxUnixMicro = maxExact - 1 - 2*int64(algorithms.MaxPeriod/time.Microsecond)

// nowArg is ARGV[1] of both scripts: now in µs, 0 for Redis TIME.
func nowArg(now time.Time) (int64, error) {
	if now.IsZero() {
		return 0, nil
	}
	us := now.UnixMicro()
	if us < 1 || us > maxUnixMicro {
		return 0, fmt.Errorf("now %s is outside the supported clock range", now.UTC().Format(time.RFC3339Nano))
	}
	return us, nil
}
