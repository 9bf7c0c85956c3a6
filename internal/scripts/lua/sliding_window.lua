-- sliding_window.lua: mirror of algorithms/sliding_window.go (read it for
-- the semantics). Registers as Go's window view: a = start (µs) of the
-- current window, b = count (its hits), c = prev (the previous window's).

-- sliding_window_at mirrors algorithms.slidingWindowAt: the window's start,
-- its count and the previous window's at now.
local function sliding_window_at(p, a, b, c, e, now)
  local _, off = divmod(now, p)
  local start = now - off
  local cur, prev = 0, 0
  if e ~= 0 then
    if a == start then
      cur, prev = b, c
    elseif a == start - p then
      prev = b
    elseif a > start then
      local _, m = divmod(a - start, p)
      if m == 0 then
        start, cur, prev = a, b, c
      end
    end
    cur, prev = math.max(cur, 0), math.max(prev, 0)
  end
  return start, cur, prev
end

local function sliding_window(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return zero_rate(h, a, b, c, e)
  end
  local start, cur, prev = sliding_window_at(p, a, b, c, e, now)
  local elapsed = math.max(now - start, 0)
  local weighted = mad(prev, p - elapsed, p - 1, p)
  local room = r - cur - weighted
  local reset = 0
  if cur > 0 then
    reset = start + 2 * p - now
  elseif prev > 0 then
    reset = start + p - now
  end
  if h > r then
    return false, math.max(room, 0), reset, NEVER, a, b, c, e
  end
  if room < 0 or h > room then
    local at
    local left = r - cur - h
    if left >= 0 then
      at = start + p - mad(left, p, 0, prev)
    else
      at = start + 2 * p - mad(r - h, p, 0, cur)
    end
    return false, math.max(room, 0), reset, at - now, a, b, c, e
  end
  cur = cur + h
  local expires = now
  if cur > 0 then
    expires = start + 2 * p
  elseif prev > 0 then
    expires = start + p
  end
  return true, room - h, expires - now, 0, start, cur, prev, expires
end

-- sliding_window_force mirrors algorithms.slidingWindowForce.
local function sliding_window_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  local start, cur, prev = sliding_window_at(p, a, b, c, e, now)
  return start, math.min(cur + h, MAX_COUNT), prev, start + 2 * p
end

-- undo only {
-- sliding_window_undo mirrors algorithms.slidingWindowUndo.
local function sliding_window_undo(lim, st, ch, now)
  if st.a == ch.a then
    st.b = math.max(st.b - ch.hits, 0)
  elseif st.a == ch.a + lim.period then
    st.c = math.max(st.c - ch.hits, 0)
  end
  return st
end
-- } undo only

-- sliding_window_valid mirrors algorithms.slidingWindowValid.
local function sliding_window_valid(r, p, cap, refill, debt, a, b, c, now)
  return b >= 0 and b <= MAX_COUNT and c >= 0 and c <= MAX_COUNT and a <= now + p
end
