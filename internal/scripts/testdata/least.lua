#!lua name=ratelimitd_least
-- The least a library can do for BenchmarkAgainstBaseline's takes (plain
-- fixed_window ops, no key twice in a take): no cached state, no checks,
-- the same commands as this library (TIME, one MGET per call, a write per
-- admitted counter) and the same packed reply. Loaded as the baseline, its
-- this/base is what this library's Lua costs beyond the work any script
-- must do. TestLeastLibraries holds that it decides as this library does.
-- A call that ends with the DISTINCT marker d has no key twice.

local OPS = {}

local function ops_of(ops)
  local op = OPS[ops]
  if not op then
    op = {}
    for i = 1, #ops / 64 do
      local _, r, p, _, _, _, h = struct.unpack('<dddddddd', ops, 64 * (i - 1) + 1)
      op[i] = { r, p, h }
    end
    OPS[ops] = op
  end
  return op
end

-- decide decides one take on keys[k0 + 1 ..], all or nothing, on what vals
-- read or an earlier take wrote (written, nil when no key repeats), writes
-- it when admitted and puts its 5 values per op in out from m + 1.
local function decide(keys, k0, ops, vals, written, now, out, m)
  local op = ops_of(ops)
  local admitted = true
  for i = 1, #op do
    local r, p, h = op[i][1], op[i][2], op[i][3]
    local v = vals[k0 + i]
    if written and written[keys[k0 + i]] then v = written[keys[k0 + i]] end
    local reset, room = p - now % p, r - (tonumber(v) or 0)
    local o = m + 5 * (i - 1)
    if room >= h then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, room - h, reset, 0, h
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, room, reset, reset, 0
      admitted = false
    end
  end
  if not admitted then
    for i = 1, #op do
      local o = m + 5 * (i - 1)
      if out[o + 1] == 1 then out[o + 2], out[o + 5] = out[o + 2] + out[o + 5], 0 end
    end
    return #op
  end
  for i = 1, #op do
    local key, h, v = keys[k0 + i], op[i][3], vals[k0 + i]
    if written and written[key] then v = written[key] end
    if v then
      redis.call('INCRBY', key, h)
    else
      redis.call('SET', key, h, 'PX', math.ceil(out[m + 5 * (i - 1) + 3] / 1000))
    end
    if written then written[key] = (tonumber(v) or 0) + h end
  end
  return #op
end

local function now_us()
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end

local function pack(out, m)
  return struct.pack('<' .. string.rep('d', m), unpack(out, 1, m))
end

redis.register_function('ratelimitd_take_1ea57', function(keys, args)
  local out = {}
  local n = decide(keys, 0, args[2], redis.call('MGET', unpack(keys)), nil, now_us(), out, 0)
  return pack(out, 5 * n)
end)

redis.register_function('ratelimitd_takes_1ea57', function(keys, args)
  local now, vals = now_us(), redis.call('MGET', unpack(keys))
  local written = {}
  if args[#args] == 'd' then written = nil end
  local out, m, k0 = {}, 0, 0
  for b = 2, #args do
    if args[b] ~= 'd' then
      local n = decide(keys, k0, args[b], vals, written, now, out, m + 1)
      out[m + 1], k0, m = 5 * n, k0 + n, m + 1 + 5 * n
    end
  end
  return pack(out, m)
end)
