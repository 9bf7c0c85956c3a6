-- sliding_window.lua: mirror of algorithms/sliding_window.go (read it for
-- the semantics). a = current window start (µs), b = its hits, c = the
-- previous window's hits.

local function sliding_window(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r = lim.period, lim.req
  local _, off = divmod(now, p)
  local start = now - off
  local cur, prev = 0, 0
  if st.e ~= 0 then
    if st.a == start then
      cur, prev = st.b, st.c
    elseif st.a == start - p then
      prev = st.b
    elseif st.a > start then
      local _, m = divmod(st.a - start, p)
      if m == 0 then
        start, cur, prev = st.a, st.b, st.c
      end
    end
    cur, prev = math.max(cur, 0), math.max(prev, 0)
  end
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
    return false, math.max(room, 0), reset, NEVER, st
  end
  if room < 0 or h > room then
    local at
    local left = r - cur - h
    if left >= 0 then
      at = start + p - mad(left, p, 0, prev)
    else
      at = start + 2 * p - mad(r - h, p, 0, cur)
    end
    return false, math.max(room, 0), reset, at - now, st
  end
  cur = cur + h
  local nst = { a = start, b = cur, c = prev, e = now }
  if cur > 0 then
    nst.e = start + 2 * p
  elseif prev > 0 then
    nst.e = start + p
  end
  return true, room - h, nst.e - now, 0, nst
end

-- sliding_window_undo mirrors algorithms.slidingWindowUndo.
local function sliding_window_undo(lim, st, ch, now)
  if st.a == ch.a then
    st.b = math.max(st.b - ch.hits, 0)
  elseif st.a == ch.a + lim.period then
    st.c = math.max(st.c - ch.hits, 0)
  end
  return st
end

-- sliding_window_valid mirrors algorithms.slidingWindowValid.
local function sliding_window_valid(lim, st, now)
  return st.b >= 0 and st.b <= MAX_COUNT and st.c >= 0 and st.c <= MAX_COUNT and st.a <= now + lim.period
end
