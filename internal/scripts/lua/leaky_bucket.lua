-- leaky_bucket.lua: mirror of algorithms/leaky_bucket.go (read it for the
-- semantics). a = drain anchor (µs), b = level, c = drained fraction of a
-- unit in 1/period units.

local function leaky_bucket(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, cap = lim.period, lim.req, lim.cap
  local level, frac, anchor = 0, 0, now
  if st.e ~= 0 then
    level, frac, anchor = clamp(st.b, 0, cap), clamp(st.c, 0, p - 1), math.max(st.a, now)
    if level == 0 then
      frac = 0
    else
      local elapsed = now - st.a
      if elapsed > 0 then
        if elapsed >= refill_time(level, frac, p, r) then
          level, frac = 0, 0
        else
          local drained
          drained, frac = muldiv(elapsed, r, frac, p)
          level = level - drained
        end
      end
    end
  end
  -- at is when the level has drained down to x < level.
  local function at(x)
    return anchor + refill_time(level - x, frac, p, r)
  end
  if h > cap then
    local reset = 0
    if level > 0 then reset = at(0) - now end
    return false, cap - level, reset, NEVER, st
  end
  local target = cap - h
  if level > target then
    return false, cap - level, at(0) - now, at(target) - now, st
  end
  level = level + h
  local nst = { a = anchor, b = level, c = frac, e = now }
  if level > 0 then nst.e = at(0) end
  return true, cap - level, nst.e - now, 0, nst
end
