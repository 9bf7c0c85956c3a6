package scripts

import (
	"fmt"
	"strings"
	"time"
)

// EncodeUndoLong is EncodeUndo with every charge in the long form.
func EncodeUndoLong(charges []Charge, now time.Time) ([]string, []any, error) {
	return encodeUndo(charges, now, false)
}

// MathSource is lua/math.lua alone, so tests can call mad directly.
var MathSource = file("math")

// ttlWrites are the script's TTL-setting writes (a log's PEXPIRE, a
// register state's and a counter's SET PX) and their recording versions,
// which store the value without a TTL and keep the TTL for the reply; and
// its write that keeps a key's TTL (a counter's INCRBY), recorded as
// KeptTTL.
var ttlWrites = [][2]string{
	{"redis.call('PEXPIRE', key, ttl_arg(e, now))", "RECORDED_TTLS[key] = ttl_ms(e, now)"},
	{"redis.call('SET', key, packed, 'PX', ttl)",
		"RECORDED_TTLS[key] = tonumber(ttl); redis.call('SET', key, packed)"},
	{"redis.call('SET', key, v, 'PX', ttl)",
		"RECORDED_TTLS[key] = tonumber(ttl); redis.call('SET', key, v)"},
	{"redis.call('INCRBY', key, d)",
		"RECORDED_TTLS[key] = -1; redis.call('INCRBY', key, d)"},
}

// CounterTags is how many windows a Counter value tells apart.
const CounterTags = counterTags

// KeptTTL is the TTL a recording script reports for a key whose last write
// kept its TTL: the one the write before it set.
const KeptTTL = -1

// ReplyValues is every integer of a take's reply, which take_many may pack
// into one string.
func ReplyValues(reply any) ([]int64, error) {
	vals, ok := valuesOf(reply)
	if !ok {
		return nil, fmt.Errorf("reply %T is no take's", reply)
	}
	out := make([]int64, vals.n)
	return out, vals.ints(0, out)
}

// recordTTLs rewrites every one of src's TTL-setting writes (plain_write
// inlines counter.lua's); ok is false when src no
// longer has one of them.
func recordTTLs(src string) (string, bool) {
	for _, w := range ttlWrites {
		if !strings.Contains(src, w[0]) {
			return "", false
		}
		src = strings.ReplaceAll(src, w[0], w[1])
	}
	return src, true
}

// RecordingSource is the take script with its TTLs recorded instead of set:
// in the differential test a fake clock, not Redis's real one, decides when
// a state expires, and a TTL of a few ms would otherwise run out in real
// time between steps. The reply is {take reply, one TTL (ms) per KEYS entry,
// 0 where the key was not written, KeptTTL where its write kept its TTL}.
// The real TTLs have their own tests.
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
	// Set at load too: the takes function's takes record into it as well.
	s = header + "\nlocal RECORDED_TTLS = {}\n" + body
	return strings.Replace(s, call, `  RECORDED_TTLS = {}
  local out = take_main()
  local ttls = {}
  for i, k in ipairs(KEYS) do ttls[i] = RECORDED_TTLS[k] or 0 end
  out = { out, ttls }
`, 1), takeFunction, true
}

// loopBody runs main iters times (ARGV's last value) with each KEYS entry
// suffixed by the iteration mod 50000, so the keys are fresh as under load,
// and returns the µs that took by Redis TIME.
const loopBody = `  if not tonumber then ` + stdGlobals + ` = std() end
  local iters = tonumber(args[#args])
  ARGV = {}
  for i = 1, #args - 1 do ARGV[i] = args[i] end
  KEYS = {}
  local t0 = redis.call('TIME')
  for it = 1, iters do
    for j = 1, #keys do KEYS[j] = keys[j] .. (it %% 50000) end
    %s
  end
  local t1 = redis.call('TIME')
  KEYS, ARGV = nil, nil
  return (tonumber(t1[1]) - tonumber(t0[1])) * 1000000 + tonumber(t1[2]) - tonumber(t0[2])
`

// FloorBody is what a take of the register layout cannot do without, and
// no logic: TIME, and per KEYS entry GET and SET ... PX of 32 bytes, with
// the TTL as a string as the take sends it (a Lua number would cost Redis
// 7.0 a "%.17g" formatting per write that the take does not pay).
const FloorBody = `redis.call('TIME')
for j = 1, #KEYS do
  redis.call('GET', KEYS[j])
  redis.call('SET', KEYS[j], '12345678901234567890123456789012', 'PX', '1000')
end
`

// LoopLibrary is Library plus two functions that time work inside Redis,
// without the network, the function call and the reply around it: loop
// runs the take iters times, floor runs FloorBody iters times.
func LoopLibrary() (lib, loop, floor string, ok bool) {
	reg := "redis.register_function('" + takeFunction + "'"
	i := strings.Index(library, reg)
	if i < 0 {
		return "", "", "", false
	}
	end := strings.Index(library[i:], "end)\n")
	if end < 0 {
		return "", "", "", false
	}
	at := i + end + len("end)\n")
	loop, floor = "ratelimitd_loop_"+libraryHash, "ratelimitd_floor_"+libraryHash
	fns := "redis.register_function('" + loop + "', function(keys, args)\n" +
		fmt.Sprintf(loopBody, "take_main()") + "end)\n" +
		"redis.register_function('" + floor + "', function(keys, args)\n" +
		fmt.Sprintf(loopBody, FloorBody) + "end)\n"
	return library[:at] + fns + library[at:], loop, floor, true
}

// FailingLibrary is Library with a take that fails, with a Lua error, for a
// first key named "fail", taken alone (take_keys) or in a batch
// (batch_take, batch_plain): a stand-in for a take that breaks inside a merged call,
// which no well-formed take does.
func FailingLibrary() (string, bool) {
	lib := library
	// Whatever their parameters after k0 are.
	for _, fn := range []string{"local function take_keys(", "local function batch_take(", "local function batch_plain("} {
		i := strings.Index(lib, fn)
		if i < 0 {
			return "", false
		}
		end := i + strings.Index(lib[i:], "\n") + 1
		lib = lib[:end] + "  if keys[k0 + 1] == 'fail' then error('injected failure') end\n" + lib[end:]
	}
	return lib, true
}

// MaxUnixMicro is the latest clock the scripts accept.
const MaxUnixMicro = maxUnixMicro
