-- token_bucket.lua: mirror of algorithms/token_bucket.go (read it for the
-- semantics). a = refill anchor (µs), b = tokens (negative in debt),
-- c = fraction of the next token in 1/period units.

-- token_bucket_at mirrors algorithms.tokenBucketAt: the bucket st holds at
-- now (exactly tokens + frac/period), refilled up to anchor.
local function token_bucket_at(lim, st, now)
  local p, r, capacity, debt = lim.period, lim.req, lim.capacity, lim.debt
  local step = math.max(lim.refill, 1)
  local _, off = divmod(now, step)
  local boundary = now - off
  if st.e == 0 then
    return capacity, 0, boundary
  end
  local tokens, frac, anchor = clamp(st.b, -debt, capacity), clamp(st.c, 0, p - 1), math.max(st.a, boundary)
  if tokens == capacity then
    return tokens, 0, anchor
  end
  local elapsed = boundary - st.a
  if elapsed > 0 then
    if elapsed >= refill_time(capacity - tokens, frac, p, r) then
      return capacity, 0, anchor
    end
    local add
    add, frac = mad(elapsed, r, frac, p)
    tokens = tokens + add
  end
  return tokens, frac, anchor
end

local function token_bucket(lim, st, h, now)
  if lim.req == 0 then
    return zero_rate(st, h)
  end
  local p, r, capacity, debt = lim.period, lim.req, lim.capacity, lim.debt
  local step = math.max(lim.refill, 1)
  local tokens, frac, anchor = token_bucket_at(lim, st, now)
  -- at is when the bucket holds x > tokens tokens.
  local function at(x)
    return ceil_to(anchor + refill_time(x - tokens, frac, p, r), step)
  end
  if h > capacity + debt then
    local reset = 0
    if tokens < capacity then reset = at(capacity) - now end
    return false, math.max(tokens, 0), reset, NEVER, st
  end
  local need = math.max(h - debt, 0)
  if tokens < need then
    return false, math.max(tokens, 0), at(capacity) - now, at(need) - now, st
  end
  tokens = tokens - h
  local nst = { a = anchor, b = tokens, c = frac, e = now }
  if tokens < capacity then nst.e = at(capacity) end
  return true, math.max(tokens, 0), nst.e - now, 0, nst
end

-- token_bucket_undo mirrors algorithms.tokenBucketUndo: give back
-- min(hits, what the charged bucket would still lack now).
local function token_bucket_undo(lim, st, ch, now)
  local p, capacity = lim.period, lim.capacity
  local tokens, frac, anchor = token_bucket_at(lim, st, now)
  local projected, pfrac = token_bucket_at(lim, ch, now)
  local lack, lack_frac = capacity - projected, 0
  if pfrac > 0 then lack, lack_frac = lack - 1, p - pfrac end
  if ch.hits < lack or (ch.hits == lack and lack_frac > 0) then
    lack, lack_frac = ch.hits, 0
  end
  tokens, frac = tokens + lack, frac + lack_frac
  if frac >= p then tokens, frac = tokens + 1, frac - p end
  if tokens >= capacity then tokens, frac = capacity, 0 end
  return { a = anchor, b = tokens, c = frac, e = st.e }
end

-- token_bucket_valid mirrors algorithms.tokenBucketValid (and its horizon).
local function token_bucket_valid(lim, st, now)
  local step = math.max(lim.refill, 1)
  local h = ceil_to(refill_time(lim.capacity + lim.debt, 0, lim.period, lim.req), step) + step
  return st.b >= -MAX_COUNT and st.b <= MAX_COUNT and st.c >= 0 and st.c <= MAX_PERIOD and st.a <= now + h
end
