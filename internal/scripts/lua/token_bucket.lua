-- token_bucket.lua: mirror of algorithms/token_bucket.go (read it for the
-- semantics). Registers as Go's bucket view: a = anchor (µs), b = units
-- (tokens, negative in debt), c = frac of the next token in 1/period units.

-- token_bucket_at mirrors algorithms.tokenBucketAt: the bucket a, b, c, e
-- holds at now (exactly tokens + frac/period), refilled up to anchor.
local function token_bucket_at(r, p, cap, refill, debt, a, b, c, e, now)
  local step = math.max(refill, 1)
  local _, off = divmod(now, step)
  local boundary = now - off
  if e == 0 then
    return cap, 0, boundary
  end
  local tokens, frac, anchor = clamp(b, -(cap + debt), cap), clamp(c, 0, p - 1), math.max(a, boundary)
  if tokens == cap then
    return tokens, 0, anchor
  end
  local elapsed = boundary - a
  if elapsed > 0 then
    if elapsed >= refill_time(cap - tokens, frac, p, r) then
      return cap, 0, anchor
    end
    local add
    add, frac = mad(elapsed, r, frac, p)
    tokens = tokens + add
  end
  return tokens, frac, anchor
end

-- token_bucket_when is when the bucket (tokens, frac, anchor) holds x >
-- tokens tokens, on a refill boundary (step µs).
local function token_bucket_when(x, tokens, frac, anchor, p, r, step)
  return ceil_to(anchor + refill_time(x - tokens, frac, p, r), step)
end

local function token_bucket(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return zero_rate(h, a, b, c, e)
  end
  local step = math.max(refill, 1)
  local tokens, frac, anchor = token_bucket_at(r, p, cap, refill, debt, a, b, c, e, now)
  if h > cap + debt then
    local reset = 0
    if tokens < cap then reset = token_bucket_when(cap, tokens, frac, anchor, p, r, step) - now end
    return false, math.max(tokens, 0), reset, NEVER, a, b, c, e
  end
  local need = math.max(h - debt, 0)
  if tokens < need then
    return false, math.max(tokens, 0), token_bucket_when(cap, tokens, frac, anchor, p, r, step) - now,
      token_bucket_when(need, tokens, frac, anchor, p, r, step) - now, a, b, c, e
  end
  tokens = tokens - h
  local expires = now
  if tokens < cap then expires = token_bucket_when(cap, tokens, frac, anchor, p, r, step) end
  return true, math.max(tokens, 0), expires - now, 0, anchor, tokens, frac, expires
end

-- token_bucket_force mirrors algorithms.tokenBucketForce: take hits past
-- the limit, down to -(cap + debt); then what it took.
local function token_bucket_force(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 then
    return a, b, c, e, 0
  end
  local step = math.max(refill, 1)
  local tokens, frac, anchor = token_bucket_at(r, p, cap, refill, debt, a, b, c, e, now)
  local nt = math.max(tokens - math.min(h, MAX_COUNT), -(cap + debt))
  return anchor, nt, frac, token_bucket_when(cap, nt, frac, anchor, p, r, step), tokens - nt
end

-- token_bucket_refund mirrors algorithms.tokenBucketRefund: tokens back,
-- up to the capacity. It returns what it gave (0: nothing changed), and
-- the state.
local function token_bucket_refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  if r == 0 or e == 0 then
    return 0, a, b, c, e
  end
  local step = math.max(refill, 1)
  local tokens, frac, anchor = token_bucket_at(r, p, cap, refill, debt, a, b, c, e, now)
  if tokens >= cap then
    return 0, a, b, c, e
  end
  if tokens + h >= cap then
    return cap - tokens, anchor, cap, 0, now
  end
  tokens = tokens + h
  return h, anchor, tokens, frac, token_bucket_when(cap, tokens, frac, anchor, p, r, step)
end

-- undo only {
-- token_bucket_undo mirrors algorithms.tokenBucketUndo: give back
-- min(applied, what the charged bucket would still lack now).
local function token_bucket_undo(lim, st, ch, now)
  local r, p, capacity, refill, debt = lim.req, lim.period, lim.capacity, lim.refill, lim.debt
  local tokens, frac, anchor = token_bucket_at(r, p, capacity, refill, debt, st.a, st.b, st.c, st.e, now)
  local projected, pfrac = token_bucket_at(r, p, capacity, refill, debt, ch.a, ch.b, ch.c, ch.e, now)
  local lack, lack_frac = capacity - projected, 0
  if pfrac > 0 then lack, lack_frac = lack - 1, p - pfrac end
  if ch.applied < lack or (ch.applied == lack and lack_frac > 0) then
    lack, lack_frac = ch.applied, 0
  end
  tokens, frac = tokens + lack, frac + lack_frac
  if frac >= p then tokens, frac = tokens + 1, frac - p end
  if tokens >= capacity then tokens, frac = capacity, 0 end
  return { a = anchor, b = tokens, c = frac, e = st.e }
end
-- } undo only

-- token_bucket_valid mirrors algorithms.tokenBucketValid (and its horizon).
local function token_bucket_valid(r, p, cap, refill, debt, a, b, c, now)
  local step = math.max(refill, 1)
  local h = ceil_to(refill_time(2 * cap + debt, 0, p, r), step) + step
  return b >= -MAX_COUNT and b <= MAX_COUNT and c >= 0 and c <= MAX_PERIOD and a <= now + h
end
