#!lua name=ratelimitd_least
-- The least a library can do for BenchmarkAgainstBaseline's takes (plain
-- fixed_window ops, no key twice in a take): no cached state, no checks,
-- the same commands as this library (TIME, one MGET per call, a write per
-- admitted counter) and the same packed reply. Loaded as the baseline, its
-- this/base is what this library's Lua costs beyond the work any script
-- must do. TestLeastLibraries holds it to this library's decisions. A call
-- that ends with the DISTINCT marker d has no key twice.
--
-- With LAYOUT 'hash' (leastLibrary("hash") writes it so) every counter of a
-- window is a field of one hash per window, a layout this library does not
-- use: a call reads with one HMGET and writes with one HSET, so its
-- this/base is what a write command per counter costs.
local LAYOUT = 'strings'

local OPS, W = {}, {}

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

-- window_hash is the hash of now's window of the call's period (every op
-- of BenchmarkAgainstBaseline's has one).
local function window_hash(now, ops)
  if LAYOUT ~= 'hash' then return nil, nil end
  local _, _, p = struct.unpack('<ddd', ops)
  return string.format('window:%.0f:%.0f', p, now - now % p), math.ceil((now - now % p + p) / 1000)
end

-- read reads the call's keys.
local function read(keys, hash)
  if LAYOUT == 'hash' then return redis.call('HMGET', hash, unpack(keys)) end
  return redis.call('MGET', unpack(keys))
end

-- write writes counter key, which held v, h more; a hash's at flush.
local function write(key, v, h, reset)
  if LAYOUT == 'hash' then
    W[#W + 1], W[#W + 2] = key, (tonumber(v) or 0) + h
  elseif v then
    redis.call('INCRBY', key, h)
  else
    redis.call('SET', key, h, 'PX', math.ceil(reset / 1000))
  end
end

-- flush writes what the call's takes admitted to its hash and dates it.
local function flush(hash, expires)
  if #W > 0 then
    redis.call('HSET', hash, unpack(W))
    redis.call('PEXPIREAT', hash, expires, 'NX')
    W = {}
  end
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
    write(key, v, h, out[m + 5 * (i - 1) + 3])
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
  local out, now = {}, now_us()
  local hash, expires = window_hash(now, args[2])
  local n = decide(keys, 0, args[2], read(keys, hash), nil, now, out, 0)
  flush(hash, expires)
  return pack(out, 5 * n)
end)

redis.register_function('ratelimitd_takes_1ea57', function(keys, args)
  local now = now_us()
  local hash, expires = window_hash(now, args[2])
  local vals, written = read(keys, hash), {}
  if args[#args] == 'd' then written = nil end
  local out, m, k0 = {}, 0, 0
  for b = 2, #args do
    if args[b] ~= 'd' then
      local n = decide(keys, k0, args[b], vals, written, now, out, m + 1)
      out[m + 1], k0, m = 5 * n, k0 + n, m + 1 + 5 * n
    end
  end
  flush(hash, expires)
  return pack(out, m)
end)
