package scripts

import (
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Charge is what one admitted take charged one key, as the take script
// reported it: enough for Undo to take it back exactly (see
// algorithms.Undo for what "exactly" means per algorithm). It is the Go
// reference's own type, so the stores pass charges on without copying.
type Charge = algorithms.Charge

// WithCharges makes the take whose ARGV Encode built reply its charges too
// (Decode): a third argument. Without it the reply stays 5 values per op,
// so a take nobody will undo costs nothing more.
func WithCharges(args []any) []any {
	return append(args, chargedMarker)
}

// WithDenials makes the take whose ARGV Encode built reply its charges and,
// after its decisions, its denials: per op, the decision it reports and
// what it applies had its batch been denied (Decode). Only a Cluster
// request whose keys span slots needs them (another slot group may deny
// it): a take without them replies and computes nothing more.
func WithDenials(args []any) []any {
	return append(args, deniedMarker)
}

// deniedMarker is ARGV[3] of a take that asks for its denials
// (WithDenials): lua/take.lua's ARGV[3] == '2'.
const deniedMarker = 2

// chargeFields is the fixed part of a charge in the take reply: the index
// (1-based) of an op on its key (whose key and limit it is), what the
// batch applied there, a, b, c, e and the number of log entries added.
const chargeFields = 7

// decodeCharges reads the charges from vals[at:]: one per key an admitted
// batch charged, none for a denied batch.
func decodeCharges(vals values, ops []algorithms.Op, at int) ([]Charge, error) {
	var out []Charge
	for at < vals.n {
		var f [chargeFields]int64
		if err := vals.ints(at, f[:]); err != nil {
			return nil, err
		}
		op, n := f[0], f[6]
		if op < 1 || op > int64(len(ops)) || f[1] < 1 || n < 0 || int64(vals.n-at) < chargeFields+2*n {
			return nil, fmt.Errorf("malformed charge %v", f)
		}
		entries := make([]int64, 2*n)
		if err := vals.ints(at+chargeFields, entries); err != nil {
			return nil, err
		}
		c := Charge{Key: ops[op-1].Key, Limit: ops[op-1].Limit}
		c.Applied = uint64(f[1])
		alg := ops[op-1].Limit.Algorithm
		c.After = FromRegisters(alg, f[2], f[3], f[4], f[5])
		if alg.Info().Log {
			c.After = algorithms.State{ExpiresAt: f[5]}
			for i := 0; i < len(entries); i += 2 {
				c.After.Log = append(c.After.Log, algorithms.LogEntry{At: f[2], Seq: entries[i], Hits: entries[i+1]})
			}
		}
		out = append(out, c)
		at += chargeFields + int(2*n)
	}
	return out, nil
}

// undoCounterTag starts the short form of a Counter charge (fixed_window's)
// in an undo's ARGV: the tag, applied, the window's start and its end, all
// that its undo reads (lua/counter.lua's counter_undo; the count comes from
// the stored value), where the long form is 13 values. Leases return many
// such charges at once (a drain, a sweep's idle leases); Redis parses and
// Lua converts under a third of the arguments. No algorithm has this value.
const undoCounterTag = 255

// counterTags is how many windows lua/counter.lua's layout tells apart: a
// counter's value is count * counterTags + its window's index mod
// counterTags.
const counterTags = 1000

// EncodeUndo builds the KEYS and ARGV of one undo (lua/undo.lua).
func EncodeUndo(charges []Charge, now time.Time) ([]string, []any, error) {
	return encodeUndo(charges, now, true)
}

// encodeUndo is EncodeUndo; short false sends Counter charges in the long
// form too (BenchmarkUndoForms compares the two).
func encodeUndo(charges []Charge, now time.Time, short bool) ([]string, []any, error) {
	us, err := nowArg(now)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(charges))
	args := make([]any, 1, 1+13*len(charges))
	args[0] = us
	for i, c := range charges {
		keys[i] = c.Key
		st := c.After
		a, b, cc := Registers(st)
		// A counter of calendar months goes in the long form: its tag needs
		// its limit's months (lua/counter.lua).
		if short && c.Limit.Algorithm.Info().Counter && !c.Limit.Calendar && c.Limit.Validate() == nil && c.Applied > 0 && len(st.Log) == 0 {
			args = append(args, undoCounterTag, min(c.Applied, maxHits), a, st.ExpiresAt)
			continue
		}
		args = appendLimit(args, c.Limit)
		if len(st.Log) > 0 {
			a = st.Log[0].At
		}
		args = append(args, min(c.Applied, maxHits), a, b, cc, st.ExpiresAt, len(st.Log))
		for _, e := range st.Log {
			args = append(args, e.Seq, e.Hits)
		}
	}
	return keys, args, nil
}
