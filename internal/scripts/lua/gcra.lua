-- gcra.lua: mirror of algorithms/gcra.go (read it for the semantics).
-- a = TAT in whole µs, b = its fraction of a µs in 1/requests units.

local function ceil_div(a, b, c, d)
  local q = mad(a, b, c + d - 1, d)
  return q
end

local function gcra(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, capacity = lim.period, lim.req, lim.capacity
  local q, rem = mad(capacity, p, 0, r)
  local tat, frac = now, 0
  if st.e ~= 0 then
    tat, frac = st.a, clamp(st.b, 0, r - 1)
    if tat > now + q or (tat == now + q and frac > rem) then
      tat, frac = now + q, rem
    end
  end
  if tat < now then
    tat, frac = now, 0
  end
  local remaining = capacity - ceil_div(tat - now, r, frac, p)
  local reset = tat - now
  if frac > 0 then reset = reset + 1 end
  if h > capacity then
    return false, remaining, reset, NEVER, st
  end
  local add, nfrac = mad(h, p, frac, r)
  local nxt = tat + add
  if nxt - now > q or (nxt - now == q and nfrac > rem) then
    local hq, hrem = mad(capacity - h, p, 0, r)
    local at = tat - hq
    if frac > hrem then at = at + 1 end
    return false, remaining, reset, at - now, st
  end
  local expires = nxt
  if nfrac > 0 then expires = expires + 1 end
  return true, capacity - ceil_div(nxt - now, r, nfrac, p), expires - now, 0,
    { a = nxt, b = nfrac, c = 0, e = expires }
end

-- gcra_undo mirrors algorithms.gcraUndo: move the TAT back by
-- min(hits*T, how far the charged TAT was still ahead of now).
local function gcra_undo(lim, st, ch, now)
  local p, r = lim.period, lim.req
  local back, back_frac = mad(ch.hits, p, 0, r)
  local ahead, ahead_frac = ch.a - now, clamp(ch.b, 0, r - 1)
  if ahead < 0 then ahead, ahead_frac = 0, 0 end
  if ahead < back or (ahead == back and ahead_frac < back_frac) then
    back, back_frac = ahead, ahead_frac
  end
  local tat, frac = st.a - back, clamp(st.b, 0, r - 1) - back_frac
  if frac < 0 then tat, frac = tat - 1, frac + r end
  if tat < now then tat, frac = now, 0 end
  return { a = tat, b = frac, c = 0, e = st.e }
end

-- gcra_valid mirrors algorithms.gcraValid (and its horizon).
local function gcra_valid(lim, st, now)
  local q = mad(lim.capacity, lim.period, 0, lim.req)
  return st.b >= 0 and st.b <= MAX_COUNT and st.a <= now + 2 * (q + 1)
end
