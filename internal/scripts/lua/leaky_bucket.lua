-- leaky_bucket.lua: mirror of algorithms/leaky_bucket.go (read it for the
-- semantics). Registers as Go's bucket view: a = anchor (µs), b = units
-- (the level), c = frac drained of a unit in 1/period units.

-- leaky_bucket_at mirrors algorithms.leakyBucketAt: the meter a, b, c, e
-- holds at now (exactly level - frac/period), drained up to anchor.
local function leaky_bucket_at(r, p, cap, a, b, c, e, now)
  if e == 0 then
    return 0, 0, now
  end
  local level, frac, anchor = clamp(b, 0, 2 * cap), clamp(c, 0, p - 1), math.max(a, now)
  if level == 0 then
    return 0, 0, anchor
  end
  local elapsed = now - a
  if elapsed > 0 then
    if elapsed >= refill_time(level, frac, p, r) then
      return 0, 0, anchor
    end
    local drained
    drained, frac = mad(elapsed, r, frac, p)
    level = level - drained
  end
  return level, frac, anchor
end

-- leaky_bucket_when is when the meter (level, frac, anchor) has drained
-- down to x < level.
local function leaky_bucket_when(x, level, frac, anchor, p, r)
  return anchor + refill_time(level - x, frac, p, r)
end

local function leaky_bucket(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return zero_rate(h, a, b, c, e)
  end
  local level, frac, anchor = leaky_bucket_at(r, p, cap, a, b, c, e, now)
  if h > cap then
    local reset = 0
    if level > 0 then reset = leaky_bucket_when(0, level, frac, anchor, p, r) - now end
    return false, math.max(cap - level, 0), reset, NEVER, a, b, c, e
  end
  local target = cap - h
  if level > target then
    return false, math.max(cap - level, 0), leaky_bucket_when(0, level, frac, anchor, p, r) - now,
      leaky_bucket_when(target, level, frac, anchor, p, r) - now, a, b, c, e
  end
  level = level + h
  local expires = now
  if level > 0 then expires = leaky_bucket_when(0, level, frac, anchor, p, r) end
  return true, cap - level, expires - now, 0, anchor, level, frac, expires
end

-- leaky_bucket_force mirrors algorithms.leakyBucketForce: add hits past
-- the limit, up to twice the capacity; then what it added.
local function leaky_bucket_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return a, b, c, e, 0
  end
  local level, frac, anchor = leaky_bucket_at(r, p, cap, a, b, c, e, now)
  local nl = math.min(level + math.min(h, MAX_COUNT), 2 * cap)
  return anchor, nl, frac, leaky_bucket_when(0, nl, frac, anchor, p, r), nl - level
end

-- leaky_bucket_refund mirrors algorithms.leakyBucketRefund: the level
-- down, to empty. It returns what it gave (0: nothing changed), and the
-- state.
local function leaky_bucket_refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 or e == 0 then
    return 0, a, b, c, e
  end
  local level, frac, anchor = leaky_bucket_at(r, p, cap, a, b, c, e, now)
  if level <= 0 then
    return 0, a, b, c, e
  end
  if h >= level then
    return level, anchor, 0, 0, now
  end
  level = level - h
  return h, anchor, level, frac, leaky_bucket_when(0, level, frac, anchor, p, r)
end

-- undo only {
-- leaky_bucket_undo mirrors algorithms.leakyBucketUndo: drain
-- min(applied, the charged meter's level now had nothing else happened).
local function leaky_bucket_undo(lim, st, ch, now)
  local r, p, capacity = lim.req, lim.period, lim.capacity
  local level, frac, anchor = leaky_bucket_at(r, p, capacity, st.a, st.b, st.c, st.e, now)
  local projected, pfrac = leaky_bucket_at(r, p, capacity, ch.a, ch.b, ch.c, ch.e, now)
  if ch.applied < projected then
    level = level - ch.applied
  else
    level, frac = level - projected, frac - pfrac
    if frac < 0 then level, frac = level + 1, frac + p end
  end
  if level <= 0 then level, frac = 0, 0 end
  return { a = anchor, b = level, c = frac, e = st.e }
end
-- } undo only

-- leaky_bucket_valid mirrors algorithms.leakyBucketValid (and its horizon).
local function leaky_bucket_valid(r, p, cap, refill, debt, a, b, c, now)
  local h = refill_time(2 * cap, 0, p, r)
  return b >= 0 and b <= MAX_COUNT and c >= 0 and c <= MAX_PERIOD and a <= now + h
end
