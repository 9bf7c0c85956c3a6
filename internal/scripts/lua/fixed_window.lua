-- fixed_window.lua: mirror of algorithms/fixed_window.go (read it for the
-- semantics). a = window start (µs), b = hits admitted in it.

local function fixed_window(lim, st, h, now)
  local p = lim.period
  local _, off = divmod(now, p)
  local start = now - off
  local count = 0
  if st.a == start and st.b > 0 then
    count = st.b
  end
  local limit = lim.req
  local reset = start + p - now
  local room = limit - count
  if room < 0 or h > room then
    local retry = reset
    if h > limit then retry = NEVER end
    return false, math.max(room, 0), reset, retry, st
  end
  count = count + h
  return true, limit - count, reset, 0, { a = start, b = count, c = 0, e = start + p }
end

-- fixed_window_undo mirrors algorithms.fixedWindowUndo.
local function fixed_window_undo(lim, st, ch, now)
  if st.a == ch.a then
    st.b = math.max(st.b - ch.hits, 0)
  end
  return st
end

-- fixed_window_valid mirrors algorithms.fixedWindowValid.
local function fixed_window_valid(lim, st, now)
  return st.b >= 0 and st.b <= MAX_COUNT
end
