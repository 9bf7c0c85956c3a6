-- take.lua: the driver. Decides every op of one request atomically and
-- all-or-nothing, exactly like algorithms.TakeAll.
--
-- KEYS: one per op (a key may repeat; later ops see the earlier ops' state).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2]: every op, packed (limit.lua's OP_FORMAT, OP_BYTES each):
--   algorithm (0 = invalid limit), requests, period µs, burst, refill
--   interval µs, max debt, hits, mode (algorithms.Mode: 0/ENFORCE, SHADOW,
--   QUOTA).
-- ARGV[3], if present: reply the charges too (scripts.WithCharges).
-- Reply: 4 integers per op: allowed (0/1), remaining, reset µs, retry µs
--   (-1 = never); then, if the batch was admitted and ARGV[3] asked for
--   them, one charge per key it wrote (see
--   charge_of): 7 integers, plus 2 per sliding_log entry added.
--
-- Phase 1 reads and computes every op without writing; phase 2 writes the
-- final state of each key that an allowed op charged, only if the batch is
-- allowed: no enforce op denied, and not every quota op denied.

-- REGS, LOG, ENFORCE, SHADOW, QUOTA and ALGS (algorithm number -> state kind
-- and step function) are generated from the Go registry (scripts/source.go).

local KINDS = {
  [REGS] = { load = regs_load, fresh = regs_fresh, copy = regs_copy, expire = regs_expire, write = regs_write },
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
-- state written: a, b, c, e and no entries for registers; now, 0, 0, ExpiresAt
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

-- admits is the batch rule: no enforced op denied, and not every quota op
-- denied. Shadow ops never deny a batch.
local function admits(enforced_denied, quota_ops, quota_denied)
  return not enforced_denied and not (quota_ops > 0 and quota_denied == quota_ops)
end

-- take_distinct is take_general for ops on distinct keys, nearly every
-- request (one op, or descriptors that each count their own key): every
-- op reads its key's stored state, so there is no pending state to track
-- per key, only what phase 2 writes.
local function take_distinct(now, n)
  local out, nsts, lim = {}, {}, {}
  local enforced_denied, quota_ops, quota_denied = false, 0, 0
  for i = 1, n do
    local h, mode
    -- No algorithm keeps its lim, so one table serves every op.
    lim, h, mode = op_of(i, lim)
    local alg, ok, rem, reset, retry = ALGS[lim.alg], false, 0, 0, NEVER
    if alg ~= nil then
      local key, kind = KEYS[i], KINDS[alg.kind]
      local st, typeok = kind.load(key, now)
      local nst
      ok, rem, reset, retry, nst = decide(alg, lim, key, kind.expire(st, now), h, now)
      if ok and h > 0 then
        if n == 1 and #ARGV == 2 then
          -- One op, allowed: the batch is admitted. No charges asked for,
          -- so nothing needs keeping for phase 2.
          kind.write(key, nst, typeok, now)
        else
          nsts[i] = { kind = alg.kind, cur = nst, typeok = typeok, last = i, hits = h }
        end
      end
    end
    if mode == QUOTA then
      quota_ops = quota_ops + 1
      if not ok then quota_denied = quota_denied + 1 end
    elseif mode ~= SHADOW and not ok then
      enforced_denied = true
    end
    local k = 4 * (i - 1)
    out[k + 1], out[k + 2], out[k + 3], out[k + 4] = ok and 1 or 0, rem, reset, retry
  end
  if not admits(enforced_denied, quota_ops, quota_denied) then
    -- Nothing is written: an allowed op reports what a check would. No op
    -- wrote, so the stored state is still each key's.
    for i = 1, n do
      if out[4 * i - 3] == 1 then
        lim = op_of(i, lim)
        local alg = ALGS[lim.alg]
        local kind = KINDS[alg.kind]
        local key = KEYS[i]
        local st = kind.expire(kind.load(key, now), now)
        local k = 4 * (i - 1)
        local ok, rem, reset, retry = decide(alg, lim, key, st, 0, now)
        out[k + 1], out[k + 2], out[k + 3], out[k + 4] = ok and 1 or 0, rem, reset, retry
      end
    end
    return out
  end
  local charges = #ARGV > 2
  for i = 1, n do
    local rec = nsts[i]
    if rec ~= nil then
      KINDS[rec.kind].write(KEYS[i], rec.cur, rec.typeok, now)
      if charges then charge_of(out, rec, now) end
    end
  end
  return out
end

-- take_general decides a batch whose ops may share keys: a key's later ops
-- see its earlier ops' pending state, as in algorithms.TakeAll.
local function take_general(now)
  local recs, order, ops = {}, {}, {}
  local enforced_denied, quota_ops, quota_denied = false, 0, 0
  for i = 1, #KEYS do
    local lim, h, mode = op_of(i)
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
  local admitted = admits(enforced_denied, quota_ops, quota_denied)
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
  if admitted and #ARGV > 2 then
    for _, rec in ipairs(order) do
      if rec.hit then charge_of(out, rec, now) end
    end
  end
  return out
end

-- distinct reports whether no key repeats among the n KEYS.
local function distinct(n)
  if n == 1 then return true end
  local seen = {}
  for i = 1, n do
    local key = KEYS[i]
    if seen[key] then return false end
    seen[key] = true
  end
  return true
end

local function take_main()
  local now = now_of(ARGV[1])
  local n = #KEYS
  if #ARGV[2] ~= OP_BYTES * n then
    error('ratelimitd: ' .. #ARGV[2] .. ' bytes of ops for ' .. n .. ' keys, want ' .. OP_BYTES * n)
  end
  if distinct(n) then
    return take_distinct(now, n)
  end
  return take_general(now)
end

-- take_many runs several independent takes in one call: what a pipeline
-- of takes would do, for one entry into Redis and one TIME instead of one
-- per take (scripts.MergeTakes builds it, the coalescer sends it).
-- KEYS: every take's KEYS, in order. ARGV[1]: now in µs, or 0 for TIME;
-- ARGV[1 + b]: take b's ops (its ARGV[2]), which say how many KEYS are
-- its. Reply: per take, its reply, or an error reply if it failed (every
-- check and decision of a take runs before its first write).
local function take_many()
  local keys, args = KEYS, ARGV
  local now = now_of(args[1])
  -- Which KEYS are whose comes from the ops' lengths: check them all
  -- before any take runs, so a malformed one fails the call, not its
  -- neighbours' keys.
  local total = 0
  for b = 2, #args do
    local bytes = #args[b]
    if bytes == 0 or bytes % OP_BYTES ~= 0 then
      error('ratelimitd: take ' .. (b - 1) .. ' has ' .. bytes .. ' bytes of ops, not a multiple of ' .. OP_BYTES)
    end
    total = total + bytes / OP_BYTES
  end
  if total ~= #keys then
    error('ratelimitd: ops for ' .. total .. ' keys, ' .. #keys .. ' KEYS')
  end
  local out, key = {}, 0
  for b = 1, #args - 1 do
    local ops = args[1 + b]
    local n = #ops / OP_BYTES
    local sub_keys = {}
    for i = 1, n do
      sub_keys[i] = keys[key + i]
    end
    key = key + n
    KEYS, ARGV = sub_keys, { now, ops }
    local ok, reply = pcall(take_main)
    if ok then
      out[b] = reply
    else
      out[b] = { err = tostring(reply) }
    end
  end
  KEYS, ARGV = keys, args
  return out
end

return take_main()
