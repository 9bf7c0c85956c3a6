-- refund.lua: a take's refunds (algorithms.NegativeHits ops, Envoy's
-- is_negative_hits), applied before anything else of the take, as
-- algorithms.TakeAll applies them: each gives its hits back on its key
-- (ALGS' refund: never below the key's fresh state), in op order, and is
-- never denied; its decision is what a check answers after it, allowed.
-- A refund is written at once and stays whatever the take's verdict: it
-- is no charge, and no undo takes it back. The take's other ops are then
-- decided on the refunded keys (take.lua skips the refund ops).
--
-- A refund that gives room back to a counter a check found with none left
-- replies LIFTED (take.lua): the only denials a replica's local cache keeps
-- are of such counters (pkg/store/localcache), so the caller publishes the
-- key to every replica after the reply (redisstore's notices), where a
-- failed PUBLISH cannot fail the refund.

-- refunds_in reports whether any of a take's n ops is a refund. It runs on
-- every take take_fixed declines, so it decodes each op's mode alone (the
-- last of OP_FORMAT's fields), not all eight.
local function refunds_in(ops, n)
  for i = 1, n do
    local packed = struct.unpack('<d', ops, OP_BYTES * i - 7)
    if mode_of(packed) == REFUND then return true end
  end
  return false
end

-- refund_regs refunds h hits of key, a register or counter state, as
-- algorithms.Refund: the state read as Take reads it (expired or out of
-- range: fresh, nothing to give back), the algorithm's refund, the write
-- (a counter's as a decrement that keeps its TTL; deleted once it no
-- longer matters). It returns what it gave back (0: the key is as it was),
-- the remaining a check gave before it, and the remaining and reset a
-- check gives after.
local function refund_regs(alg, r, p, cap, refill, debt, key, h, now)
  local a, b, c, e, kept = stored_regs(alg, r, p, cap, refill, debt, key, now)
  local _, before = alg.take(r, p, cap, refill, debt, a, b, c, e, 0, now)
  local given = 0
  if h > 0 and e ~= 0 then
    given, a, b, c, e = alg.refund(r, p, cap, refill, debt, a, b, c, e, h, now)
  end
  if given > 0 then
    if alg.kind == REGS then
      if e <= now then redis.call('DEL', key) else regs_set(key, a, b, c, e, now) end
    else
      counter_put(key, a, b, e, now, kept, refill)
    end
    if e <= now then a, b, c, e = 0, 0, 0, 0 end
  end
  local _, rem, reset = alg.take(r, p, cap, refill, debt, a, b, c, e, 0, now)
  return given, before, rem, reset
end

-- refund_log is refund_regs for a log (sliding_log_refund works on the
-- ZSET itself; a check reads it back).
local function refund_log(alg, lim, key, h, now)
  local function check()
    local view = log_expire(log_load(key, now), now)
    if lim.req > 0 and not alg.valid(lim, view, now) then view = log_fresh(key) end
    local _, rem, reset = alg.take(lim, view, 0, now)
    return rem, reset
  end
  local before = check()
  local given = 0
  if h > 0 then given = alg.refund(lim, key, h, now) end
  local rem, reset = check()
  return given, before, rem, reset
end

-- refund_pass applies the refunds among a take's n ops, in order, and
-- returns their decisions by op index: { remaining, reset, given, lifted }
-- (allowed, retry 0; given: what it gave back; lifted: room given back to a
-- counter with none). An invalid limit gives nothing back and answers 0, 0.
local function refund_pass(now, keys, k0, ops, n)
  local done = {}
  for i = 1, n do
    local an, r, p, burst, refill, debt, h, packed = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
    if mode_of(packed) == REFUND then
      local alg, key = ALGS[an], keys[k0 + i]
      local given, before, rem, reset = 0, 1, 0, 0
      h = math.min(h, MAX_COUNT)
      if alg ~= nil and alg.kind == LOG then
        given, before, rem, reset = refund_log(alg, limit_new(an, r, p, burst, refill, debt), key, h, now)
      elseif alg ~= nil then
        local cap = burst
        if cap == 0 then cap = r end
        given, before, rem, reset = refund_regs(alg, r, p, cap, refill, debt, key, h, now)
      end
      done[i] = { rem, reset, given, given > 0 and before == 0 }
    end
  end
  return done
end
