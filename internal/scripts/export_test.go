package scripts

import "strings"

// MathSource is lua/math.lua alone, so tests can call mad directly.
var MathSource = file("math")

// ttlWrites are the script's two TTL-setting writes (a log's PEXPIRE and a
// register state's SET PX) and their recording versions, which store the
// value without a TTL and keep the TTL for the reply.
var ttlWrites = [][2]string{
	{"redis.call('PEXPIRE', key, ttl_ms(e, now))", "RECORDED_TTLS[key] = ttl_ms(e, now)"},
	{"redis.call('SET', key, regs_pack(st), 'PX', ttl_ms(st.e, now))",
		"RECORDED_TTLS[key] = ttl_ms(st.e, now); redis.call('SET', key, regs_pack(st))"},
}

// recordTTLs rewrites src's TTL-setting writes; ok is false when src no
// longer has one of them.
func recordTTLs(src string) (string, bool) {
	for _, w := range ttlWrites {
		if !strings.Contains(src, w[0]) {
			return "", false
		}
		src = strings.Replace(src, w[0], w[1], 1)
	}
	return src, true
}

// RecordingSource is the take script with its TTLs recorded instead of set:
// in the differential test a fake clock, not Redis's real one, decides when
// a state expires, and a TTL of a few ms would otherwise run out in real
// time between steps. The reply is {take reply, one TTL (ms) per KEYS entry,
// 0 where the key was not written}. The real TTLs have their own tests.
// ok is false when the script no longer has the lines this rewrites.
func RecordingSource() (src string, ok bool) {
	s, ok := recordTTLs(source)
	if !ok || !strings.Contains(s, "return take_main()") {
		return "", false
	}
	s = "local RECORDED_TTLS = {}\n" + s
	return strings.Replace(s, "return take_main()", `local out = take_main()
local ttls = {}
for i, k in ipairs(KEYS) do ttls[i] = RECORDED_TTLS[k] or 0 end
return { out, ttls }`, 1), true
}

// RecordingLibrary is Library with the take function recording its TTLs as
// RecordingSource does, so the differential test judges the FCALL path too.
// fn is the take function's name.
func RecordingLibrary() (lib, fn string, ok bool) {
	const call = "  local out = take_main()\n"
	s, ok := recordTTLs(library)
	if !ok || !strings.Contains(s, call) {
		return "", "", false
	}
	header, body, _ := strings.Cut(s, "\n")
	s = header + "\nlocal RECORDED_TTLS\n" + body
	return strings.Replace(s, call, `  RECORDED_TTLS = {}
  local out = take_main()
  local ttls = {}
  for i, k in ipairs(KEYS) do ttls[i] = RECORDED_TTLS[k] or 0 end
  out = { out, ttls }
`, 1), takeFunction, true
}
