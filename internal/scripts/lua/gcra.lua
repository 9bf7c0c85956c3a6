-- gcra.lua: mirror of algorithms/gcra.go (read it for the semantics).
-- a = TAT in whole µs, b = its fraction of a µs in 1/requests units.

local function ceil_div(a, b, c, d)
  local q = muldiv(a, b, c + d - 1, d)
  return q
end

local function gcra(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, cap = lim.period, lim.req, lim.cap
  local q, rem = muldiv(cap, p, 0, r)
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
  local remaining = cap - ceil_div(tat - now, r, frac, p)
  local reset = tat - now
  if frac > 0 then reset = reset + 1 end
  if h > cap then
    return false, remaining, reset, NEVER, st
  end
  local add, nfrac = muldiv(h, p, frac, r)
  local nxt = tat + add
  if nxt - now > q or (nxt - now == q and nfrac > rem) then
    local hq, hrem = muldiv(cap - h, p, 0, r)
    local at = tat - hq
    if frac > hrem then at = at + 1 end
    return false, remaining, reset, at - now, st
  end
  local expires = nxt
  if nfrac > 0 then expires = expires + 1 end
  return true, cap - ceil_div(nxt - now, r, nfrac, p), expires - now, 0,
    { a = nxt, b = nfrac, c = 0, e = expires }
end
