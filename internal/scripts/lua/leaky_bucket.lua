-- leaky_bucket.lua: mirror of algorithms/leaky_bucket.go (read it for the
-- semantics). a = drain anchor (µs), b = level, c = drained fraction of a
-- unit in 1/period units.

-- leaky_bucket_at mirrors algorithms.leakyBucketAt: the meter st holds at
-- now (exactly level - frac/period), drained up to anchor.
local function leaky_bucket_at(lim, st, now)
  local p, r, capacity = lim.period, lim.req, lim.capacity
  if st.e == 0 then
    return 0, 0, now
  end
  local level, frac, anchor = clamp(st.b, 0, capacity), clamp(st.c, 0, p - 1), math.max(st.a, now)
  if level == 0 then
    return 0, 0, anchor
  end
  local elapsed = now - st.a
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

local function leaky_bucket(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, capacity = lim.period, lim.req, lim.capacity
  local level, frac, anchor = leaky_bucket_at(lim, st, now)
  -- at is when the level has drained down to x < level.
  local function at(x)
    return anchor + refill_time(level - x, frac, p, r)
  end
  if h > capacity then
    local reset = 0
    if level > 0 then reset = at(0) - now end
    return false, capacity - level, reset, NEVER, st
  end
  local target = capacity - h
  if level > target then
    return false, capacity - level, at(0) - now, at(target) - now, st
  end
  level = level + h
  local nst = { a = anchor, b = level, c = frac, e = now }
  if level > 0 then nst.e = at(0) end
  return true, capacity - level, nst.e - now, 0, nst
end

-- leaky_bucket_undo mirrors algorithms.leakyBucketUndo: drain
-- min(hits, the charged meter's level now had nothing else happened).
local function leaky_bucket_undo(lim, st, ch, now)
  local p = lim.period
  local level, frac, anchor = leaky_bucket_at(lim, st, now)
  local projected, pfrac = leaky_bucket_at(lim, ch, now)
  if ch.hits < projected then
    level = level - ch.hits
  else
    level, frac = level - projected, frac - pfrac
    if frac < 0 then level, frac = level + 1, frac + p end
  end
  if level <= 0 then level, frac = 0, 0 end
  return { a = anchor, b = level, c = frac, e = st.e }
end

-- leaky_bucket_valid mirrors algorithms.leakyBucketValid (and its horizon).
local function leaky_bucket_valid(lim, st, now)
  local h = refill_time(lim.capacity, 0, lim.period, lim.req)
  return st.b >= 0 and st.b <= MAX_COUNT and st.c >= 0 and st.c <= MAX_PERIOD and st.a <= now + h
end
