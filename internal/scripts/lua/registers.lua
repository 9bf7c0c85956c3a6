-- registers.lua: storage of every algorithm whose state is a few integers.
--
-- Layout: one string of four little-endian binary64 numbers (32 bytes):
-- three registers a, b, c whose meaning belongs to the algorithm
-- (algorithms/registers.go), and e = ExpiresAt (µs). Every value is an
-- integer below 2^53, which binary64 holds exactly. One GET reads it and one
-- SET ... PX writes it with its TTL: two commands and one C call to decode,
-- where a hash took HMGET, HSET, PEXPIRE and four tonumber. e is stored, not
-- derived, because a rule's limit may change between calls and only the
-- writer knew when its state stopped mattering.
--
-- Keys written as a hash {a, b, c, e} by releases before this layout are
-- still read (regs_load_hash), so an upgrade keeps every live counter; the
-- first write turns the key into the string.

local REGS_FORMAT, REGS_BYTES = '<dddd', 32

local function regs_fresh()
  return { a = 0, b = 0, c = 0, e = 0 }
end

-- regs_of is the state of four numbers, or a fresh one when any is not an
-- exact integer (NaN, an infinity, a fraction, a magnitude past 2^53).
local function regs_of(a, b, c, e)
  -- exact() inlined: x % 1 is NaN for NaN and the infinities, nonzero for
  -- a fraction; this runs on every read.
  if a % 1 == 0 and b % 1 == 0 and c % 1 == 0 and e % 1 == 0
    and a >= -TWO53 and a <= TWO53 and b >= -TWO53 and b <= TWO53
    and c >= -TWO53 and c <= TWO53 and e >= -TWO53 and e <= TWO53 then
    return { a = a, b = b, c = c, e = e }
  end
  return regs_fresh()
end

-- regs_load_hash reads the hash layout of older releases; any other type
-- is treated as absent (the write replaces it).
local function regs_load_hash(key)
  local v = redis.pcall('HMGET', key, 'a', 'b', 'c', 'e')
  if type(v) ~= 'table' or v.err then
    return regs_fresh()
  end
  local a, b, c, e = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if a == nil or b == nil or c == nil or e == nil then
    return regs_fresh()
  end
  return regs_of(a, b, c, e)
end

-- regs_load returns the stored state, or a fresh one for an absent key and
-- for a string that is not 32 bytes of exact integers. The second result
-- is the storage contract of take.lua: regs_write replaces any type.
local function regs_load(key)
  local v = redis.pcall('GET', key)
  if not v then
    return regs_fresh(), true
  end
  if type(v) == 'string' then
    if #v ~= REGS_BYTES then
      return regs_fresh(), true
    end
    local a, b, c, e = struct.unpack(REGS_FORMAT, v)
    return regs_of(a, b, c, e), true
  end
  return regs_load_hash(key), true
end

local function regs_copy(st)
  return { a = st.a, b = st.b, c = st.c, e = st.e }
end

-- regs_expire applies the generic rule of algorithms.Take: a state at or past
-- its ExpiresAt is a fresh one.
local function regs_expire(st, now)
  if st.e ~= 0 and now >= st.e then
    return regs_fresh()
  end
  return st
end

local function regs_pack(st)
  return struct.pack(REGS_FORMAT, st.a, st.b, st.c, st.e)
end

-- regs_write stores st with its TTL in one command; SET replaces whatever
-- type the key held.
local function regs_write(key, st, typeok, now)
  redis.call('SET', key, regs_pack(st), 'PX', ttl_ms(st.e, now))
end
