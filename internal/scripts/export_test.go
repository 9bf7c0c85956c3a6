package scripts

import "strings"

// MathSource is lua/math.lua alone, so tests can call muldiv directly.
var MathSource = file("math")

// RecordingSource is the take script with its TTLs recorded instead of set:
// in the differential test a fake clock, not Redis's real one, decides when
// a state expires, and a TTL of a few ms would otherwise run out in real
// time between steps. The reply is {take reply, one TTL (ms) per KEYS entry,
// 0 where the key was not written}. The real PEXPIRE has its own tests.
// ok is false when the script no longer has the lines this rewrites.
func RecordingSource() (src string, ok bool) {
	const set = "redis.call('PEXPIRE', key, ttl_ms(e, now))"
	if !strings.Contains(source, set) || !strings.Contains(source, "return take_main()") {
		return "", false
	}
	s := "local RECORDED_TTLS = {}\n" + source
	s = strings.Replace(s, set, "RECORDED_TTLS[key] = ttl_ms(e, now)", 1)
	return strings.Replace(s, "return take_main()", `local out = take_main()
local ttls = {}
for i, k in ipairs(KEYS) do ttls[i] = RECORDED_TTLS[k] or 0 end
return { out, ttls }`, 1), true
}
