-- take.lua: the driver. Decides every op of one request atomically and
-- all-or-nothing, exactly like algorithms.TakeAll.
--
-- KEYS: one per op (a key may repeat; later ops see the earlier ops' state).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2..]: 8 integers per op: algorithm (0 = invalid limit), requests,
--   period µs, burst, refill interval µs, max debt (limit.lua), hits, mode
--   (algorithms.Mode: 0/ENFORCE, SHADOW, QUOTA).
-- Reply: 4 integers per op: allowed (0/1), remaining, reset µs, retry µs
--   (-1 = never); then, if the batch was admitted and a trailing ARGV asked
--   for them (scripts.TakeCharged), one charge per key it wrote (see
--   charge_of): 7 integers, plus 2 per sliding_log entry added.
--
-- Phase 1 reads and computes every op without writing; phase 2 writes the
-- final state of each key that an allowed op charged, only if the batch is
-- allowed: no enforce op denied, and not every quota op denied.

-- HASH, LOG, ENFORCE, SHADOW, QUOTA and ALGS (algorithm number -> state kind
-- and step function) are generated from the Go registry (scripts/source.go).

local KINDS = {
  [HASH] = { load = hash_load, fresh = hash_fresh, copy = hash_copy, expire = hash_expire, write = hash_write },
  [LOG] = { load = log_load, fresh = log_fresh, copy = log_copy, expire = log_expire, write = log_write },
}

-- original returns the stored state of rec's key as kind, loading it once.
local function original(rec, kind, now)
  local st = rec.orig[kind]
  if st == nil then
    st, rec.typeok[kind] = KINDS[kind].load(rec.key, now)
    rec.orig[kind] = st
  end
  return KINDS[kind].copy(st)
end

-- current returns the pending state for an op of kind: the stored one for a
-- key's first op, and a fresh one when the previous op left another kind
-- (algorithms.Take reads another algorithm family's state as absent).
local function current(rec, kind, now)
  if rec.kind == nil then
    rec.kind = kind
    rec.cur = original(rec, kind, now)
  elseif rec.kind ~= kind then
    rec.kind = kind
    rec.cur = KINDS[kind].fresh(rec.key)
  end
  rec.cur = KINDS[kind].expire(rec.cur, now)
  return rec.cur
end

local FIELDS = 8

-- decide mirrors algorithms.Take past the generic expiry: a live state out
-- of the algorithm's range (see algorithms/valid.go) reads as absent.
local function decide(alg, lim, key, st, h, now)
  if lim.req > 0 and not alg.valid(lim, st, now) then
    st = KINDS[alg.kind].fresh(key)
  end
  return alg.take(lim, st, h, now)
end

-- charge_of appends what the batch charged rec's key, for an exact undo
-- (scripts.Charge): the last op that charged it, the hits charged, and the
-- state written: a, b, c, e and no entries for a hash; now, 0, 0, ExpiresAt
-- and the (seq, hits) of each entry added for a log.
local function charge_of(out, rec, now)
  local st, n = rec.cur, #out
  if rec.kind == LOG then
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = rec.last, rec.hits, now, 0
    out[n + 5], out[n + 6], out[n + 7] = 0, st.exp, #st.pend
    for i, e in ipairs(st.pend) do
      out[n + 6 + 2 * i], out[n + 7 + 2 * i] = e.seq, e.hits
    end
  else
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = rec.last, rec.hits, st.a, st.b
    out[n + 5], out[n + 6], out[n + 7] = st.c, st.e, 0
  end
end

-- take_one is take_main for a request of one op, most requests: the same
-- decision, write and charge without the tables a batch needs to track keys
-- and ops. With one op the batch is admitted whenever the op is allowed, and
-- a denied op charges nothing, so there is nothing to re-decide.
local function take_one(now)
  local lim = limit_of(2)
  local h = tonumber(ARGV[8])
  local alg = ALGS[lim.alg]
  if alg == nil then
    return { 0, 0, 0, NEVER }
  end
  local key, kind = KEYS[1], KINDS[alg.kind]
  local st, typeok = kind.load(key, now)
  local ok, rem, reset, retry, nst = decide(alg, lim, key, kind.expire(st, now), h, now)
  local out = { ok and 1 or 0, rem, reset, retry }
  if ok and h > 0 then
    kind.write(key, nst, typeok, now)
    if #ARGV > 1 + FIELDS then
      charge_of(out, { kind = alg.kind, cur = nst, last = 1, hits = h }, now)
    end
  end
  return out
end

local function take_main()
  local now = tonumber(ARGV[1])
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  if #KEYS == 1 then
    return take_one(now)
  end
  local recs, order, ops = {}, {}, {}
  local enforced_denied, quota_ops, quota_denied = false, 0, 0
  for i = 1, #KEYS do
    local j = 2 + (i - 1) * FIELDS
    local lim = limit_of(j)
    local h = tonumber(ARGV[j + 6])
    local mode = tonumber(ARGV[j + 7])
    local key = KEYS[i]
    local rec = recs[key]
    if rec == nil then
      rec = { key = key, orig = {}, typeok = {} }
      recs[key] = rec
      order[#order + 1] = rec
    end
    local alg = ALGS[lim.alg]
    local op = { rec = rec, lim = lim, h = h, alg = alg }
    ops[i] = op
    if alg == nil then
      op.ok, op.rem, op.reset, op.retry = false, 0, 0, NEVER
      -- algorithms.Take still drops an expired pending state.
      if rec.kind ~= nil then rec.cur = KINDS[rec.kind].expire(rec.cur, now) end
    else
      local st = current(rec, alg.kind, now)
      local nst
      op.ok, op.rem, op.reset, op.retry, nst = decide(alg, op.lim, rec.key, st, h, now)
      rec.cur = nst
      if h > 0 and op.ok then
        rec.hit, rec.hits, rec.last = true, (rec.hits or 0) + h, i
      end
    end
    if mode == QUOTA then
      quota_ops = quota_ops + 1
      if not op.ok then quota_denied = quota_denied + 1 end
    elseif mode ~= SHADOW and not op.ok then
      enforced_denied = true
    end
  end
  local admitted = not enforced_denied and not (quota_ops > 0 and quota_denied == quota_ops)
  if admitted then
    for _, rec in ipairs(order) do
      if rec.hit then
        KINDS[rec.kind].write(rec.key, rec.cur, rec.typeok[rec.kind], now)
      end
    end
  else
    -- Nothing is written: an allowed op reports what a check would.
    for _, op in ipairs(ops) do
      if op.ok then
        local kind = op.alg.kind
        local st = KINDS[kind].expire(original(op.rec, kind, now), now)
        op.ok, op.rem, op.reset, op.retry = decide(op.alg, op.lim, op.rec.key, st, 0, now)
      end
    end
  end
  local out = {}
  for i, op in ipairs(ops) do
    local k = (i - 1) * 4
    out[k + 1] = op.ok and 1 or 0
    out[k + 2] = op.rem
    out[k + 3] = op.reset
    out[k + 4] = op.retry
  end
  if admitted and #ARGV > 1 + FIELDS * #KEYS then
    for _, rec in ipairs(order) do
      if rec.hit then charge_of(out, rec, now) end
    end
  end
  return out
end

return take_main()
