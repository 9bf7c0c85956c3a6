package scripts

import "strings"

// MathSource is lua/math.lua alone, so tests can call mad directly.
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

// RecordingLibrary is Library with the take function recording its TTLs as
// RecordingSource does, so the differential test judges the FCALL path too.
// fn is the take function's name.
func RecordingLibrary() (lib, fn string, ok bool) {
	const set = "redis.call('PEXPIRE', key, ttl_ms(e, now))"
	const call = "  local out = take_main()\n"
	if !strings.Contains(library, set) || !strings.Contains(library, call) {
		return "", "", false
	}
	header, body, _ := strings.Cut(library, "\n")
	s := header + "\nlocal RECORDED_TTLS\n" + body
	s = strings.Replace(s, set, "RECORDED_TTLS[key] = ttl_ms(e, now)", 1)
	return strings.Replace(s, call, `  RECORDED_TTLS = {}
  local out = take_main()
  local ttls = {}
  for i, k in ipairs(KEYS) do ttls[i] = RECORDED_TTLS[k] or 0 end
  out = { out, ttls }
`, 1), takeFunction, true
}
