-- sliding_window.lua: mirror of algorithms/sliding_window.go (read it for
-- the semantics). Registers as Go's window view: a = start (µs) of the
-- current window, b = count (its hits), c = prev (the previous window's).
-- The refill field carries the limit's calendar months (0: windows of p µs
-- from the epoch; calendar.lua).

-- sliding_window_at mirrors algorithms.slidingWindowAt: the window's start
-- and end, its count and the previous window's at now.
local function sliding_window_at(p, months, a, b, c, e, now)
  local start, stop = window_at(p, months, now)
  local cur, prev = 0, 0
  if e ~= 0 then
    if a == start then
      cur, prev = b, c
    elseif a == window_before(p, months, start) then
      prev = b
    elseif a > start and is_window_start(p, months, a) then
      start, stop, cur, prev = a, window_after(p, months, a), b, c
    end
    cur, prev = math.max(cur, 0), math.max(prev, 0)
  end
  return start, stop, cur, prev
end

-- sliding_window_expiry mirrors algorithms.slidingWindowExpiry.
local function sliding_window_expiry(p, months, stop, cur, prev, now)
  if cur > 0 then return window_after(p, months, stop) end
  if prev > 0 then return stop end
  return now
end

local function sliding_window(r, p, cap, refill, debt, a, b, c, e, h, now)
  local months = refill
  if r == 0 then
    return zero_rate(h, a, b, c, e)
  end
  local start, stop, cur, prev = sliding_window_at(p, months, a, b, c, e, now)
  local len = stop - start
  local elapsed = math.max(now - start, 0)
  local weighted = mad(prev, len - elapsed, len - 1, len)
  local room = r - cur - weighted
  local reset = sliding_window_expiry(p, months, stop, cur, prev, now) - now
  if h > r then
    return false, math.max(room, 0), reset, NEVER, a, b, c, e
  end
  if room < 0 or h > room then
    local at
    local left = r - cur - h
    if left >= 0 then
      at = stop - mad(left, len, 0, prev)
    else
      local nxt = window_after(p, months, stop)
      at = nxt - mad(r - h, nxt - stop, 0, cur)
    end
    return false, math.max(room, 0), reset, at - now, a, b, c, e
  end
  cur = cur + h
  local expires = sliding_window_expiry(p, months, stop, cur, prev, now)
  return true, room - h, expires - now, 0, start, cur, prev, expires
end

-- sliding_window_force mirrors algorithms.slidingWindowForce; then what
-- it counted.
local function sliding_window_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  local months = refill
  local start, stop, cur, prev = sliding_window_at(p, months, a, b, c, e, now)
  local n = math.min(cur + h, MAX_COUNT)
  return start, n, prev, window_after(p, months, stop), n - cur
end

-- sliding_window_refund mirrors algorithms.slidingWindowRefund: the
-- current window's count first, then the previous one's, each down to 0.
-- It returns what it gave (0: nothing changed), and the state.
local function sliding_window_refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  local months = refill
  local start, stop, cur, prev = sliding_window_at(p, months, a, b, c, e, now)
  if r == 0 or (cur == 0 and prev == 0) then
    return 0, a, b, c, e
  end
  local from_cur = math.min(cur, h)
  local from_prev = math.min(prev, h - from_cur)
  cur, prev = cur - from_cur, prev - from_prev
  return from_cur + from_prev, start, cur, prev, sliding_window_expiry(p, months, stop, cur, prev, now)
end

-- undo only {
-- sliding_window_undo mirrors algorithms.slidingWindowUndo.
local function sliding_window_undo(lim, st, ch, now)
  if st.a == ch.a then
    st.b = math.max(st.b - ch.applied, 0)
  elseif st.a == window_after(lim.period, lim.refill, ch.a) then
    st.c = math.max(st.c - ch.applied, 0)
  end
  return st
end
-- } undo only

-- sliding_window_valid mirrors algorithms.slidingWindowValid.
local function sliding_window_valid(r, p, cap, refill, debt, a, b, c, now)
  return b >= 0 and b <= MAX_COUNT and c >= 0 and c <= MAX_COUNT and a <= now + longest_window(p, refill)
end
