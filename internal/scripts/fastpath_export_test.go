package scripts

import "strings"

// fastPathCall is where take_keys tries take_fixed before take_general.
const fastPathCall = "local out = take_fixed(now, keys, k0, ops, n, charges, not d)"

// SourceWithoutFastPath is the take script with take_fixed never tried: the
// reference its fast path must match bit for bit. ok is false when the
// script no longer calls it so.
func SourceWithoutFastPath() (src string, ok bool) {
	if !strings.Contains(source, fastPathCall) {
		return "", false
	}
	return strings.Replace(source, fastPathCall, "local out = nil", 1), true
}

// fallbackCall is where take_keys goes on when take_fixed declined a take.
const fallbackCall = "\n  return take_general(now, keys, k0, ops, n, charges, denials, d)"

// SourceCountingFallbacks is the take script counting in key counter (INCR)
// every take that take_fixed declined: which batches the fast path decides.
func SourceCountingFallbacks(counter string) (src string, ok bool) {
	return countingFallbacks(source, counter)
}

// LibraryCountingFallbacks is Library counting so, for FCALL of
// TakeFunction: a library keeps take_fixed's caches between calls, where
// a script starts every call without them.
func LibraryCountingFallbacks(counter string) (lib string, ok bool) {
	return countingFallbacks(library, counter)
}

func countingFallbacks(code, counter string) (string, bool) {
	if strings.Count(code, fallbackCall) != 1 {
		return "", false
	}
	return strings.Replace(code, fallbackCall, "\n  redis.call('INCR', '"+counter+"')"+fallbackCall, 1), true
}
