-- token_bucket.lua: mirror of algorithms/token_bucket.go (read it for the
-- semantics). a = refill anchor (µs), b = tokens (negative in debt),
-- c = fraction of the next token in 1/period units.

local function token_bucket(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, cap, debt = lim.period, lim.req, lim.cap, lim.debt
  local step = math.max(lim.refill, 1)
  local _, off = divmod(now, step)
  local boundary = now - off
  local tokens, frac, anchor = cap, 0, boundary
  if st.e ~= 0 then
    tokens, frac, anchor = clamp(st.b, -debt, cap), clamp(st.c, 0, p - 1), math.max(st.a, boundary)
    if tokens == cap then
      frac = 0
    else
      local elapsed = boundary - st.a
      if elapsed > 0 then
        if elapsed >= refill_time(cap - tokens, frac, p, r) then
          tokens, frac = cap, 0
        else
          local add
          add, frac = muldiv(elapsed, r, frac, p)
          tokens = tokens + add
        end
      end
    end
  end
  -- at is when the bucket holds x > tokens tokens.
  local function at(x)
    return ceil_to(anchor + refill_time(x - tokens, frac, p, r), step)
  end
  if h > cap + debt then
    local reset = 0
    if tokens < cap then reset = at(cap) - now end
    return false, math.max(tokens, 0), reset, NEVER, st
  end
  local need = math.max(h - debt, 0)
  if tokens < need then
    return false, math.max(tokens, 0), at(cap) - now, at(need) - now, st
  end
  tokens = tokens - h
  local nst = { a = anchor, b = tokens, c = frac, e = now }
  if tokens < cap then nst.e = at(cap) end
  return true, math.max(tokens, 0), nst.e - now, 0, nst
end
