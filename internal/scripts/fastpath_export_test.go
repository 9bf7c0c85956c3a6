package scripts

import "strings"

// fastPathCall is where take_keys tries take_fixed before take_distinct.
const fastPathCall = "local out = take_fixed(now, keys, k0, ops, n, charges)"

// SourceWithoutFastPath is the take script with take_fixed never tried: the
// reference its fast path must match bit for bit. ok is false when the
// script no longer calls it so.
func SourceWithoutFastPath() (src string, ok bool) {
	if !strings.Contains(source, fastPathCall) {
		return "", false
	}
	return strings.Replace(source, fastPathCall, "local out = nil", 1), true
}
