-- registers.lua: storage of every algorithm whose state is a few integers.
--
-- Layout: one string of four little-endian binary64 numbers (32 bytes):
-- three registers a, b, c whose meaning belongs to the algorithm
-- (algorithms/registers.go), and e = ExpiresAt (µs). Every value is an
-- integer below 2^53, which binary64 holds exactly. One GET reads it and one
-- SET ... PX writes it with its TTL: two commands and one C call to decode,
-- where a hash would take HMGET, HSET, PEXPIRE and four tonumber. e is
-- stored, not derived, because a rule's limit may change between calls and
-- only the writer knew when its state stopped mattering.
--
-- The take (take.lua) carries a state as the four numbers a, b, c, e: a
-- table per state costs an allocation, its garbage and a hash lookup per
-- field. regs_load gives the table view the undo script keeps per key.

local REGS_FORMAT, REGS_BYTES = '<dddd', 32

-- regs_exact reports whether all four numbers are exact integers (not
-- NaN, an infinity, a fraction or a magnitude past 2^53): exact() inlined,
-- as this runs on every read.
local function regs_exact(a, b, c, e)
  return a % 1 == 0 and b % 1 == 0 and c % 1 == 0 and e % 1 == 0
    and a >= -TWO53 and a <= TWO53 and b >= -TWO53 and b <= TWO53
    and c >= -TWO53 and c <= TWO53 and e >= -TWO53 and e <= TWO53
end

-- regs_get returns the stored a, b, c, e, or a fresh state (all 0) for an
-- absent key, for a string that is not 32 bytes of exact integers, and for
-- a key of another type (pcall: GET's WRONGTYPE must not fail the batch).
-- regs_set replaces whatever type the key held.
local function regs_get(key)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'string' or #v ~= REGS_BYTES then
    return 0, 0, 0, 0
  end
  local a, b, c, e = struct.unpack(REGS_FORMAT, v)
  if regs_exact(a, b, c, e) then
    return a, b, c, e
  end
  return 0, 0, 0, 0
end

-- regs_put stores a packed state with its TTL argument (ttl_arg) in one
-- command; a ttl of false deletes the key instead (regs_ttl).
local function regs_put(key, packed, ttl)
  if not ttl then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, packed, 'PX', ttl)
end

-- regs_ttl is regs_put's ttl for a state expiring at e: false (delete)
-- when it no longer matters at now, as algorithms.TakeAll's settle writes it.
local function regs_ttl(e, now)
  if e <= now then return false end
  return ttl_arg(e, now)
end

local function regs_set(key, a, b, c, e, now)
  regs_put(key, struct.pack(REGS_FORMAT, a, b, c, e), regs_ttl(e, now))
end

-- The table view of the undo script (undo.lua's undo_regs).

local function regs_load(key)
  local a, b, c, e = regs_get(key)
  return { a = a, b = b, c = c, e = e }
end

local function regs_pack(st)
  return struct.pack(REGS_FORMAT, st.a, st.b, st.c, st.e)
end
