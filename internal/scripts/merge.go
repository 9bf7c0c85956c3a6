package scripts

import "fmt"

// A pipeline of takes costs Redis one function entry, one TIME and one
// reply per take. The coalescer (redisstore) folds the takes it pipelines
// into one call of the takes function (lua/take.lua's take_many), which runs
// them one after the other, exactly as the pipeline would, with one TIME:
// their decisions are as of the same instant, the one their shared round
// trip reached Redis.

// Mergeable reports whether args (a redis.Cmd's Args) are an FCALL of the
// take function as Runner sends it, without asking for charges (Cluster's
// undo does), and its now: 0 for Redis TIME, as in production; takes merge
// only with takes of the same now.
func Mergeable(args []any) (now int64, ok bool) {
	if len(args) < 4 || args[0] != "fcall" || args[1] != takeFunction {
		return 0, false
	}
	n, ok := args[2].(int)
	if !ok || n < 1 || len(args) != 3+n+2 {
		return 0, false
	}
	if ops, ok := args[3+n+1].(string); !ok || len(ops) != opBytes*n {
		return 0, false
	}
	now, ok = args[3+n].(int64)
	return now, ok
}

// MergeTakes is the args of one FCALL of the takes function running every
// call in calls, all Mergeable with the same now: KEYS is every take's
// KEYS; ARGV is now, then each take's ops (whose lengths say which KEYS are
// whose).
func MergeTakes(calls [][]any) []any {
	keys := 0
	for _, c := range calls {
		keys += c[2].(int)
	}
	merged := make([]any, 0, 3+keys+1+len(calls))
	merged = append(merged, "fcall", takesFunction, keys)
	for _, c := range calls {
		merged = append(merged, c[3:3+c[2].(int)]...)
	}
	merged = append(merged, calls[0][3+calls[0][2].(int)])
	for _, c := range calls {
		merged = append(merged, c[3+c[2].(int)+1])
	}
	return merged
}

// SplitTakes turns the reply (or error) of a merged call of n takes into
// each take's own: its reply, or its error.
func SplitTakes(reply any, err error, n int) ([]any, []error) {
	vals, errs := make([]any, n), make([]error, n)
	if err == nil {
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
