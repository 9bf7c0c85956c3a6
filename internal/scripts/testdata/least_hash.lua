#!lua name=ratelimitd_least_hash
-- least.lua on a layout this library does not use: every counter of a
-- window a field of one hash per window (BenchmarkAgainstBaseline's takes
-- share one period), so a call reads with one HMGET and writes with one
-- HSET, and the hash expires with its window. Loaded as the baseline, its
-- this/base is what a write command per counter costs (-- DISTINCT: d).

local OPS, W = {}, {}

local function window_hash(now, period)
  return string.format('window:%.0f:%.0f', period, now - now % period)
end

-- flush writes the counters the call's takes admitted and dates the hash.
local function flush(hash, now, period)
  if #W > 0 then
    redis.call('HSET', hash, unpack(W))
    redis.call('PEXPIREAT', hash, math.ceil((now - now % period + period) / 1000), 'NX')
  end
  W = {}
end

local function period_of(ops)
  local _, _, p = struct.unpack('<ddd', ops)
  return p
end

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
    W[#W + 1], W[#W + 2] = key, (tonumber(v) or 0) + h
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

redis.register_function('ratelimitd_take_1ea58', function(keys, args)
  local out, now, p = {}, now_us(), period_of(args[2])
  local hash = window_hash(now, p)
  local n = decide(keys, 0, args[2], redis.call('HMGET', hash, unpack(keys)), nil, now, out, 0)
  flush(hash, now, p)
  return pack(out, 5 * n)
end)

redis.register_function('ratelimitd_takes_1ea58', function(keys, args)
  local now, p = now_us(), period_of(args[2])
  local hash = window_hash(now, p)
  local vals = redis.call('HMGET', hash, unpack(keys))
  local written = {}
  if args[#args] == 'd' then written = nil end
  local out, m, k0 = {}, 0, 0
  for b = 2, #args do
    if args[b] ~= 'd' then
      local n = decide(keys, k0, args[b], vals, written, now, out, m + 1)
      out[m + 1], k0, m = 5 * n, k0 + n, m + 1 + 5 * n
    end
  end
  flush(hash, now, p)
  return pack(out, m)
end)
