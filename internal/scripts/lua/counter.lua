-- counter.lua: storage of the Counter family (fixed_window's state: the
-- count of the current window; algorithms.Counter).
--
-- Layout: one integer string, count * COUNT_TAGS + tag, where tag is the
-- window's index (its start / the period) mod COUNT_TAGS: "42017" is 42
-- hits in a window of tag 17, readable in redis-cli. The first write of a
-- window SETs it with PX to the window's end; later writes of that window
-- INCRBY it, and the key keeps that TTL: what envoyproxy/ratelimit stores
-- (INCRBY, then EXPIRE), but for the tag, and Redis keeps it as an
-- integer, nothing allocated. An undo is a decrement, floored at 0, in the
-- charge's window (at the end of this file, in the undo script only).
--
-- The tag stands for the window's start, which matters to fixed_window
-- only as being the current window's or not (algorithms.fixedWindow counts
-- the stored count of the current window only): a key lives until its
-- window ends, so the only other windows a read meets are the one that just
-- ended (within the ms a TTL is rounded up) and, after Redis's clock went
-- back, later ones; windows COUNT_TAGS apart share a tag. The period is part
-- of a counter's key (internal/config's KeyBuilder), so a key is only ever
-- read under one period. Every value stays below 2^53 (count <= MAX_COUNT).

-- counter_tag is the tag of the window [start, stop): start is a multiple
-- of its length, so start / (stop - start) is exact, and so is % on
-- integers below 2^53. A window of months calendar months (calendar.lua)
-- is tagged by its first month's index instead: consecutive windows are
-- months < COUNT_TAGS apart, so their tags differ too.
local function counter_tag(start, stop, months)
  if months > 0 then return month_index(start) % COUNT_TAGS end
  return (start / (stop - start)) % COUNT_TAGS
end

-- counter_value is the integer v holds, or nil when v is not what INCRBY
-- reads as one (decimal digits, no sign, no leading zero, so that a take
-- never fails on it) or not below 2^53: such a key, or one of another
-- type, reads as absent, and the next write overwrites it.
local function counter_value(v)
  if type(v) ~= 'string' or #v > 16 or not (v == '0' or string.find(v, '^[1-9]%d*$')) then
    return nil
  end
  local n = tonumber(v)
  if n >= TWO53 then return nil end
  return n
end

-- counter_of reads the value n (counter_value's) for the window of period
-- p (or of months calendar months) current at now: the state a, b, c, e
-- of that window (a fresh one when n is another window's, or nil) and n
-- again when the window is that one (a write then keeps the key's TTL, see
-- counter_put), else nil.
local function counter_of(n, p, months, now)
  if n == nil then return 0, 0, 0, 0, nil end
  local start, stop = window_at(p, months, now)
  local tag = n % COUNT_TAGS
  if tag ~= counter_tag(start, stop, months) then
    return 0, 0, 0, 0, nil
  end
  return start, (n - tag) / COUNT_TAGS, 0, stop, n
end

-- counter_get is counter_of on key's stored value (pcall: GET's WRONGTYPE
-- must not fail the batch).
local function counter_get(key, p, months, now)
  return counter_of(counter_value(redis.pcall('GET', key)), p, months, now)
end

-- counter_set stores the value string v with its TTL argument (ttl_arg)
-- in one command; counter_incr moves a stored value within its window by
-- d (a string), keeping the key's TTL.
local function counter_set(key, v, ttl)
  redis.call('SET', key, v, 'PX', ttl)
end

local function counter_incr(key, d)
  redis.call('INCRBY', key, d)
end

-- counter_put writes the state a, b (the count), e of the window [a, e)
-- (of months calendar months, or none) to key. kept is the stored value
-- when it is that window's (counter_of): then INCRBY moves it to the new
-- one and the key keeps the TTL its window's first write set, for that
-- same end. Otherwise SET ... PX replaces whatever the key held; a state
-- that no longer matters at now (e <= now, algorithms.TakeAll's settle)
-- deletes it.
local function counter_put(key, a, b, e, now, kept, months)
  if e <= now then
    redis.call('DEL', key)
    return
  end
  local v = b * COUNT_TAGS + counter_tag(a, e, months)
  if kept then
    counter_incr(key, int(v - kept))
  else
    counter_set(key, int(v), ttl_arg(e, now))
  end
end

-- undo only {
-- counter_undo takes hits back from key, charged in the window [a, e):
-- the count drops by at most what it holds (floored at 0) while that
-- window is current, and nothing after (algorithms.fixedWindowUndo). It
-- reports whether it found a live count, of that window or another.
local function counter_undo(key, hits, a, e, now, months)
  local n = counter_value(redis.pcall('GET', key))
  if n == nil then return false end
  local tag = n % COUNT_TAGS
  if tag ~= counter_tag(a, e, months) then return true end
  if now >= e then return false end
  local b = (n - tag) / COUNT_TAGS
  if b > 0 then
    redis.call('INCRBY', key, int(-math.min(hits, b) * COUNT_TAGS))
  end
  return true
end
-- } undo only
