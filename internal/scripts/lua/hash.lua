-- hash.lua: storage of every algorithm whose state is a few integers.
--
-- Layout: a Redis hash {a, b, c, e}: three registers whose meaning belongs to
-- the algorithm, and e = ExpiresAt (µs). e is stored, not derived, because a
-- rule's limit may change between calls and only the writer knew when its
-- state stopped mattering; Redis drops the key itself by PEXPIRE, which this
-- field makes exact to the microsecond.

local function hash_fresh()
  return { a = 0, b = 0, c = 0, e = 0 }
end

-- hash_load returns the stored state (or a fresh one) and whether the key is
-- a hash or absent; any other type, and a hash whose fields are not exact
-- integers, is treated as absent and replaced.
local function hash_load(key)
  local v = redis.pcall('HMGET', key, 'a', 'b', 'c', 'e')
  if type(v) ~= 'table' or v.err then
    return hash_fresh(), false
  end
  local a, b, c, e = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if exact(a) and exact(b) and exact(c) and exact(e) then
    return { a = a, b = b, c = c, e = e }, true
  end
  return hash_fresh(), true
end

local function hash_copy(st)
  return { a = st.a, b = st.b, c = st.c, e = st.e }
end

-- hash_expire applies the generic rule of algorithms.Take: a state at or past
-- its ExpiresAt is a fresh one.
local function hash_expire(st, now)
  if st.e ~= 0 and now >= st.e then
    return hash_fresh()
  end
  return st
end

local function hash_write(key, st, typeok, now)
  if not typeok then
    redis.call('DEL', key)
  end
  redis.call('HSET', key, 'a', int(st.a), 'b', int(st.b), 'c', int(st.c), 'e', int(st.e))
  expire_at(key, st.e, now)
end
