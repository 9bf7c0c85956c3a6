-- fixed_window.lua: mirror of algorithms/fixed_window.go (read it for the
-- semantics). Its state is a Counter (counter.lua keeps it as one integer);
-- the driver reads and writes it as registers, as Go's window view: a =
-- start (µs), b = count, c = 0, e = the window's end.
--
-- Every register algorithm takes the limit (requests r, period p µs,
-- capacity, refill interval µs (a window's: its calendar months,
-- calendar.lua), max debt), the state a, b, c, e, the hits
-- and now, and returns allowed, remaining, reset, retry and the new state
-- (the same one when it denies): numbers only, see registers.lua.

local function fixed_window(r, p, cap, refill, debt, a, b, c, e, h, now)
  local start, stop = window_at(p, refill, now)
  local count = 0
  if a == start and b > 0 then
    count = b
  end
  local reset = stop - now
  local room = r - count
  if room < 0 or h > room then
    local retry = reset
    if h > r then retry = NEVER end
    return false, math.max(room, 0), reset, retry, a, b, c, e
  end
  count = count + h
  return true, r - count, reset, 0, start, count, 0, stop
end

-- fixed_window_force mirrors algorithms.fixedWindowForce: count hits past
-- the limit, up to MAX_COUNT, until the window ends; then what it counted.
local function fixed_window_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  local start, stop = window_at(p, refill, now)
  local count = 0
  if a == start and b > 0 then
    count = b
  end
  local n = math.min(count + h, MAX_COUNT)
  return start, n, 0, stop, n - count
end

-- fixed_window_refund mirrors algorithms.fixedWindowRefund: the count of
-- the current window down by h, floored at 0 (the driver writes it as a
-- decrement that keeps the key's TTL, counter_put). It returns what it
-- gave (0: nothing changed), and the state.
local function fixed_window_refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  local start = window_at(p, refill, now)
  if e == 0 or a ~= start or b <= 0 then
    return 0, a, b, c, e
  end
  local given = math.min(h, b)
  return given, a, b - given, c, e
end

-- undo only {
-- fixed_window_undo mirrors algorithms.fixedWindowUndo on the key itself,
-- as every undo of a family other than registers does (undo.lua):
-- counter_undo, which the short form of a charge calls directly.
local function fixed_window_undo(lim, key, ch, now)
  return counter_undo(key, ch.applied, ch.a, ch.e, now, lim.refill)
end
-- } undo only

-- fixed_window_valid mirrors algorithms.fixedWindowValid.
local function fixed_window_valid(r, p, cap, refill, debt, a, b, c, now)
  return b >= 0 and b <= MAX_COUNT
end
