package scripts

import (
	"fmt"
	"slices"
)

// A pipeline of takes costs Redis one function entry, one TIME and one
// reply per take. The coalescer (redisstore) folds the takes it pipelines
// into one call of the takes function (lua/take.lua's take_many), which runs
// them one after the other, exactly as the pipeline would, with one TIME:
// their decisions are as of the same instant, the one their shared round
// trip reached Redis.

// splitFCall is the one reader of the FCALL layout of a redis.Cmd's Args
// (go-redis's FCall: "fcall", function, numkeys, KEYS..., ARGV...), so that
// deciding whether takes merge and merging them cannot disagree on it.
func splitFCall(args []any) (fn any, keys, argv []any, ok bool) {
	if len(args) < 3 || args[0] != "fcall" {
		return nil, nil, nil, false
	}
	n, ok := args[2].(int)
	if !ok || n < 0 || len(args) < 3+n {
		return nil, nil, nil, false
	}
	return args[1], args[3 : 3+n], args[3+n:], true
}

// chargedMarker is ARGV[3] of a take that asks for its charges
// (WithCharges), and in a merged call the value after such a take's ops
// (lua/take.lua's CHARGED).
const chargedMarker = 1

// Mergeable reports whether args (a redis.Cmd's Args) are an FCALL of the
// take function as Runner sends it, asking for nothing more or for its
// charges (WithCharges) or denials (WithDenials, a Cluster slot group of a
// request spanning slots), its now and its first key (whose slot is a
// Cluster take's): now is 0 for Redis TIME, as in production; takes merge
// only with takes of the same now.
func Mergeable(args []any) (now int64, firstKey string, ok bool) {
	fn, keys, argv, ok := splitFCall(args)
	if !ok || fn != takeFunction || len(keys) < 1 || len(argv) < 2 || len(argv) > 3 {
		return 0, "", false
	}
	if len(argv) == 3 {
		if more, ok := argv[2].(int); !ok || (more != chargedMarker && more != deniedMarker) {
			return 0, "", false
		}
	}
	if ops, ok := argv[1].(string); !ok || len(ops) != opBytes*len(keys) {
		return 0, "", false
	}
	now, ok = argv[0].(int64)
	if !ok {
		return 0, "", false
	}
	firstKey, ok = keys[0].(string)
	if !ok {
		return 0, "", false
	}
	return now, firstKey, true
}

// MergeTakes is the args of one FCALL of the takes function running every
// call in calls, all Mergeable with the same now: KEYS is every take's
// KEYS; ARGV is now, then each take's ops (whose lengths say which KEYS are
// whose), each followed by its marker when that take asks for its charges
// or denials; last, distinctMarker when no key repeats among KEYS.
func MergeTakes(calls [][]any) []any {
	keys := make([][]any, len(calls))
	argv := make([][]any, len(calls))
	total, more := 0, 0
	for i, c := range calls {
		_, keys[i], argv[i], _ = splitFCall(c)
		total += len(keys[i])
		more += len(argv[i]) - 2
	}
	merged := make([]any, 0, 3+total+1+len(calls)+more+1)
	merged = append(merged, "fcall", takesFunction, total)
	for _, k := range keys {
		merged = append(merged, k...)
	}
	merged = append(merged, argv[0][0])
	for _, a := range argv {
		// Its ops, and its marker if it has one.
		merged = append(merged, a[1:]...)
	}
	if distinctKeys(merged[3 : 3+total]) {
		merged = append(merged, distinctMarker)
	}
	return merged
}

// distinctMarker ends a merged call's ARGV when no key repeats among its
// KEYS (lua/take_many.lua's DISTINCT): then no take reads what another
// wrote, and the script keeps no record of what it wrote. Telling it costs
// the service a comparison of the keys; keeping that record cost Redis about
// 5% of a decision (BenchmarkAgainstBaseline).
const distinctMarker = "d"

// distinctKeys reports whether no key repeats among keys: by pairs for the
// few keys of most calls, where a set would cost an allocation.
func distinctKeys(keys []any) bool {
	if len(keys) <= 16 {
		for i, k := range keys {
			if _, ok := k.(string); !ok || slices.Contains(keys[:i], k) {
				return false
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		key, ok := k.(string)
		if _, dup := seen[key]; dup || !ok {
			return false
		}
		seen[key] = struct{}{}
	}
	return true
}

// SplitTakes turns the reply (or error) of a merged call of n takes into
// each take's own: its reply, or its error.
func SplitTakes(reply any, err error, n int) ([]any, []error) {
	vals, errs := make([]any, n), make([]error, n)
	if batch, ok := reply.(string); ok && err == nil {
		// take_batch's one string: per take its number of values, then them.
		if err = splitBatch(batch, vals); err == nil {
			return vals, errs
		}
		clear(vals)
	} else if err == nil {
		parts, ok := reply.([]any)
		if !ok || len(parts) != n {
			err = fmt.Errorf("takes reply %T of %d values for %d takes", reply, lenOf(reply), n)
		} else {
			for i, p := range parts {
				if e, isErr := p.(error); isErr {
					errs[i] = e
					continue
				}
				vals[i] = p
			}
			return vals, errs
		}
	}
	for i := range errs {
		errs[i] = err
	}
	return vals, errs
}

// splitBatch cuts take_batch's reply (lua/take_many.lua) into each take's
// values, each a packed reply of its own (Decode reads it), without a copy.
func splitBatch(batch string, vals []any) error {
	at := 0
	for i := range vals {
		if len(batch)-at < 8 {
			return fmt.Errorf("takes reply of %d bytes ends before take %d of %d", len(batch), i+1, len(vals))
		}
		m, err := values{packed: batch[at : at+8], n: 1}.int(0)
		if err != nil || m < 0 || int64(len(batch)-at-8)/8 < m {
			return fmt.Errorf("takes reply of %d bytes: take %d of %d has a bad length", len(batch), i+1, len(vals))
		}
		vals[i] = batch[at+8 : at+8+8*int(m)]
		at += 8 + 8*int(m)
	}
	if at != len(batch) {
		return fmt.Errorf("takes reply of %d bytes has %d more after %d takes", len(batch), len(batch)-at, len(vals))
	}
	return nil
}
