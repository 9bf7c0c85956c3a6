-- gcra.lua: mirror of algorithms/gcra.go (read it for the semantics).
-- Registers as Go's arrival view: a = tat in whole µs, b = frac of a µs
-- in 1/requests units.

local function ceil_div(a, b, c, d)
  local q = mad(a, b, c + d - 1, d)
  return q
end

-- gcra_at mirrors algorithms.gcraAt: the TAT at now, never behind the
-- clock nor more than 2*cap*T ahead.
local function gcra_at(r, p, cap, a, b, e, now)
  local tat, frac = now, 0
  if e ~= 0 then
    local q2, rem2 = mad(2 * cap, p, 0, r)
    tat, frac = a, clamp(b, 0, r - 1)
    if tat > now + q2 or (tat == now + q2 and frac > rem2) then
      tat, frac = now + q2, rem2
    end
  end
  if tat < now then
    tat, frac = now, 0
  end
  return tat, frac
end

local function gcra(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return zero_rate(h, a, b, c, e)
  end
  local q, rem = mad(cap, p, 0, r)
  local tat, frac = gcra_at(r, p, cap, a, b, e, now)
  local remaining = math.max(cap - ceil_div(tat - now, r, frac, p), 0)
  local reset = tat - now
  if frac > 0 then reset = reset + 1 end
  if h > cap then
    return false, remaining, reset, NEVER, a, b, c, e
  end
  local add, nfrac = mad(h, p, frac, r)
  local nxt = tat + add
  if nxt - now > q or (nxt - now == q and nfrac > rem) then
    local hq, hrem = mad(cap - h, p, 0, r)
    local at = tat - hq
    if frac > hrem then at = at + 1 end
    return false, remaining, reset, at - now, a, b, c, e
  end
  local expires = nxt
  if nfrac > 0 then expires = expires + 1 end
  return true, cap - ceil_div(nxt - now, r, nfrac, p), expires - now, 0, nxt, nfrac, 0, expires
end

-- gcra_force mirrors algorithms.gcraForce: move the TAT by h*T past the
-- limit in whole emission intervals, as far as 2*cap*T ahead of the
-- clock; then how many it moved.
local function gcra_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return a, b, c, e, 0
  end
  local tat, frac = gcra_at(r, p, cap, a, b, e, now)
  local k = math.min(h, MAX_COUNT, math.max(2 * cap - ceil_div(tat - now, r, frac, p), 0))
  local add
  add, frac = mad(k, p, frac, r)
  tat = tat + add
  local expires = tat
  if frac > 0 then expires = expires + 1 end
  return tat, frac, 0, expires, k
end

-- gcra_refund mirrors algorithms.gcraRefund: the TAT back by h emission
-- intervals, never before now. It returns what it gave (0: nothing
-- changed), and the state.
local function gcra_refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 or e == 0 then
    return 0, a, b, c, e
  end
  local tat, frac = gcra_at(r, p, cap, a, b, e, now)
  if tat == now and frac == 0 then
    return 0, a, b, c, e
  end
  local taken = ceil_div(tat - now, r, frac, p)
  if h >= taken then
    return taken, now, 0, 0, now
  end
  local back, back_frac = mad(h, p, 0, r)
  tat, frac = tat - back, frac - back_frac
  if frac < 0 then tat, frac = tat - 1, frac + r end
  local expires = tat
  if frac > 0 then expires = expires + 1 end
  return h, tat, frac, 0, expires
end

-- undo only {
-- gcra_undo mirrors algorithms.gcraUndo: move the TAT back by
-- min(applied*T, how far the charged TAT was still ahead of now).
local function gcra_undo(lim, st, ch, now)
  local p, r = lim.period, lim.req
  local back, back_frac = mad(ch.applied, p, 0, r)
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
-- } undo only

-- gcra_valid mirrors algorithms.gcraValid (and its horizon).
local function gcra_valid(r, p, cap, refill, debt, a, b, c, now)
  local q2 = mad(2 * cap, p, 0, r)
  return b >= 0 and b <= MAX_COUNT and a <= now + 2 * (q2 + 1)
end
