-- take.lua: the driver. Decides every op of one request atomically and
-- all-or-nothing, exactly like algorithms.TakeAll.
--
-- KEYS: one per op (a key may repeat; later ops see the earlier ops' state).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2]: every op, packed (limit.lua's OP_FORMAT, OP_BYTES each):
--   algorithm (0 = invalid limit), requests, period µs, burst, refill
--   interval µs (a window's calendar months, calendar.lua), max debt, hits,
--   mode (algorithms.Mode: 0/ENFORCE, SHADOW,
--   QUOTA, SPARE, REFUND (NegativeHits, refund.lua); plus USAGE when the hits
--   are usage, algorithms.Op.Usage; plus
--   JOINED when the op is another limit of the previous op's descriptor,
--   algorithms.Op.Joined).
-- ARGV[3], if present: reply the charges too (scripts.WithCharges); if it
--   is 2, the denials too (scripts.WithDenials).
-- Reply: 4 integers per op: its code (DENIED, ALLOWED, LIFTED or RECORDED,
--   below), remaining, reset µs, retry µs (-1 = never); then, if ARGV[3] is 2, 4 more per op: its denial, the
--   decision it reports had the batch been denied (what phase 2 answers; a
--   denied batch's own decisions again), for a Cluster slot group whose
--   request another group denies (redisstore's takeSpread); then, if the
--   batch was admitted and ARGV[3] asked for them, one charge per key it
--   wrote (see charge_of): 7 integers, plus 2 per sliding_log entry added.
--
-- Phase 1 reads and computes every op without writing, assuming the batch
-- is admitted (so usage, shadow and quota ops are recorded past their
-- limits, as algorithms.Record does); phase 2 writes the final state of
-- each key an op charged if the batch is admitted (no enforce op denied,
-- and not every quota op denied), and else only what its usage ops
-- recorded. A spare op (a lease top-up) is taken only when it fits: it is
-- never recorded past its limit and never denies the batch.

-- REGS, LOG, COUNT, ENFORCE, SHADOW, QUOTA, SPARE and ALGS (algorithm
-- number -> storage kind, whether a zero rate records, and step functions)
-- are generated from the Go registry (scripts/source.go). A register or
-- counter algorithm's take and valid work on numbers (fixed_window.lua says
-- how); a log's on a limit table and a view (sliding_log.lua).

local KINDS = {
  [REGS] = { load = regs_load, fresh = regs_fresh, copy = regs_copy, expire = regs_expire, write = regs_write },
  [LOG] = { load = log_load, fresh = log_fresh, copy = log_copy, expire = log_expire, write = log_write },
  [COUNT] = { load = counter_load, fresh = regs_fresh, copy = regs_copy, expire = regs_expire, write = counter_write },
}

-- original returns the stored state of rec's key as kind, loading it once
-- (a counter reads its window under lim, the first op's of its kind).
local function original(rec, kind, now, lim)
  local st = rec.orig[kind]
  if st == nil then
    st, rec.typeok[kind] = KINDS[kind].load(rec.key, now, lim)
    rec.orig[kind] = st
  end
  return KINDS[kind].copy(st)
end

-- current returns the pending state for an op of kind under lim: the
-- stored one for a key's first op, and a fresh one when the previous op
-- left another kind (algorithms.Take reads another algorithm family's
-- state as absent).
local function current(rec, kind, now, lim)
  if rec.kind == nil then
    rec.kind = kind
    rec.cur = original(rec, kind, now, lim)
  elseif rec.kind ~= kind then
    rec.kind = kind
    rec.cur = KINDS[kind].fresh(rec.key)
  end
  rec.cur = KINDS[kind].expire(rec.cur, now)
  return rec.cur
end

-- decide mirrors algorithms.Take past the generic expiry, on a state table
-- of either kind: a live state out of the algorithm's range (see
-- algorithms/valid.go) reads as absent.
local function decide(alg, lim, key, st, h, now)
  if alg.kind ~= LOG then
    local r, p, cap, refill, debt = lim.req, lim.period, lim.capacity, lim.refill, lim.debt
    local a, b, c, e = st.a, st.b, st.c, st.e
    if r > 0 and not alg.valid(r, p, cap, refill, debt, a, b, c, now) then
      a, b, c, e = 0, 0, 0, 0
    end
    local ok, rem, reset, retry
    ok, rem, reset, retry, a, b, c, e = alg.take(r, p, cap, refill, debt, a, b, c, e, h, now)
    return ok, rem, reset, retry, { a = a, b = b, c = c, e = e, m = refill }
  end
  if lim.req > 0 and not alg.valid(lim, st, now) then
    st = KINDS[alg.kind].fresh(key)
  end
  return alg.take(lim, st, h, now)
end

-- record mirrors algorithms.Record after decide denied h hits on st (the
-- state decide returned, as it read it): the forced state, then what a
-- check answers on it. Only for h > 0 and a limit of some requests.
local function record(alg, lim, key, st, h, now)
  local forced
  if alg.kind ~= LOG then
    local a, b, c, e = alg.force(lim.req, lim.period, lim.capacity, lim.refill, lim.debt, st.a, st.b, st.c, st.e, h, now)
    forced = { a = a, b = b, c = c, e = e, m = lim.refill }
  else
    forced = alg.force(lim, st, h, now)
  end
  local _, rem, reset, retry = decide(alg, lim, key, forced, 0, now)
  return rem, reset, retry, forced
end

-- records reports whether an op whose take was denied is recorded anyway
-- in the first phase: usage always; shadow and quota ops count past their
-- limits when the batch is admitted, which phase 1 assumes; enforce and
-- spare ops never (a spare op that does not fit is not taken). A zero rate
-- records only where the algorithm's ZeroRate is ZeroCounts (ALGS' zero;
-- algorithms.Record).
local function records(alg, usage, mode, h, r)
  return h > 0 and (r > 0 or alg.zero) and (usage or mode == SHADOW or mode == QUOTA)
end

-- decide_stored is decide on the stored state of key, for an op given by
-- its fields (limit.lua): ok, rem, reset, retry, then the new state: a, b,
-- c, e for registers and counters (no table built), or a view and its
-- typeok for a log; then whether the op was recorded past its limit
-- (record: it may be; rem is then what was left before it, RECORDED); then, for a counter, the stored value a write keeps
-- the TTL of (counter_of's).
local function decide_stored(alg, an, r, p, burst, refill, debt, key, h, now, rec)
  if alg.kind ~= LOG then
    local cap = burst
    if cap == 0 then cap = r end
    local a, b, c, e, kept = stored_regs(alg, r, p, cap, refill, debt, key, now)
    local ok, rem, reset, retry, na, nb, nc, ne = alg.take(r, p, cap, refill, debt, a, b, c, e, h, now)
    if ok or not rec then
      return ok, rem, reset, retry, na, nb, nc, ne, false, kept
    end
    na, nb, nc, ne = alg.force(r, p, cap, refill, debt, a, b, c, e, h, now)
    -- rem stays what was left before the hits (RECORDED).
    local _
    _, _, reset, retry = alg.take(r, p, cap, refill, debt, na, nb, nc, ne, 0, now)
    return false, rem, reset, retry, na, nb, nc, ne, true, kept
  end
  local view, typeok = log_load(key, now)
  local lim = limit_new(an, r, p, burst, refill, debt)
  local ok, rem, reset, retry, nview = decide(alg, lim, key, log_expire(view, now), h, now)
  if ok or not rec then
    return ok, rem, reset, retry, nview, typeok, nil, nil, false
  end
  local _
  _, reset, retry, nview = record(alg, lim, key, nview, h, now)
  return false, rem, reset, retry, nview, typeok, nil, nil, true
end

-- write_state stores what decide_stored returned for an allowed op (months:
-- a counter's calendar months, its limit's refill field).
local function write_state(kind, key, x1, x2, x3, x4, now, kept, months)
  if kind == REGS then
    regs_set(key, x1, x2, x3, x4, now)
  elseif kind == COUNT then
    counter_put(key, x1, x2, x4, now, kept, months)
  else
    log_write(key, x1, x2, now)
  end
end

-- charge_of appends what the batch charged a key, for an exact undo
-- (scripts.Charge): the last op that charged it, the hits charged, and the
-- state st written: a, b, c, e and no entries for registers; now, 0, 0,
-- ExpiresAt and the (seq, hits) of each entry added for a log. Usage is
-- never undone, so a key usage charged has no charge (take_general). A log
-- that kept no entry of the batch (a record past a full log, or a later op
-- under another limit that read it as fresh) has nothing to take back: no
-- charge (algorithms.Charges).
local function charge_of(out, kind, last, hits, st, now)
  local n = #out
  if kind == LOG and #st.pend == 0 then return end
  if kind == LOG then
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = last, hits, now, 0
    out[n + 5], out[n + 6], out[n + 7] = 0, st.exp, #st.pend
    for i, e in ipairs(st.pend) do
      out[n + 6 + 2 * i], out[n + 7 + 2 * i] = e.seq, e.hits
    end
  elseif st.e <= now then
    -- Written as deleted: algorithms.TakeAll's settled state.
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = last, hits, 0, 0
    out[n + 5], out[n + 6], out[n + 7] = 0, 1, 0
  else
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = last, hits, st.a, st.b
    out[n + 5], out[n + 6], out[n + 7] = st.c, st.e, 0
  end
end

-- verdict_new is algorithms.Verdict: the counts the batch rule needs, fed
-- op by op in batch order by verdict_add. Takes run one at a time, so one
-- table, reset here, serves them all (as PENDING does).
local VERDICT = {}
local function verdict_new()
  local v = VERDICT
  v.enforced_denied, v.quota_ops, v.quota_denied, v.in_quota, v.alt_denied = false, 0, 0, false, false
  return v
end

-- verdict_add counts one op. A quota alternative is a quota op with the
-- joined quota ops after it (one descriptor's limits), denied when any of
-- them is.
local function verdict_add(v, mode, joined, ok)
  if mode ~= QUOTA then
    v.in_quota = false
    -- Shadow and spare ops never deny the batch.
    if mode ~= SHADOW and mode ~= SPARE and not ok then v.enforced_denied = true end
    return
  end
  if not joined or not v.in_quota then
    v.quota_ops = v.quota_ops + 1
    v.alt_denied = false
  end
  v.in_quota = true
  if not ok and not v.alt_denied then
    v.alt_denied = true
    v.quota_denied = v.quota_denied + 1
  end
end

-- admits is the batch rule: no enforced op denied, and not every quota
-- alternative denied. Shadow and spare ops never deny a batch.
local function admits(v)
  return not v.enforced_denied and not (v.quota_ops > 0 and v.quota_denied == v.quota_ops)
end

-- An op's code in the reply (scripts.decodeAt): DENIED and ALLOWED; LIFTED
-- is a refund that gave room back to a counter with none left, which the
-- caller publishes to every replica's local cache (redisstore's notices);
-- RECORDED is a denial recorded past the limit anyway, whose remaining is
-- then what was left before its hits (algorithms.Decision.RemainingBefore;
-- after them nothing is).
local DENIED, ALLOWED, LIFTED, RECORDED = 0, 1, 2, 3

-- A take decides n ops, packed in ops (checked: OP_BYTES each), on
-- keys[k0 + 1 .. k0 + n]; charges asks for the charges in the reply,
-- denials (only with charges) for the denials after the decisions.

-- PENDING holds take_distinct's writes until the batch is decided, four
-- slots per op: its kind (false: nothing to write), then the packed state
-- and its TTL argument (regs_ttl) for registers, the state table and the
-- stored value whose TTL it keeps (or false) for a counter, or the view
-- and its typeok for a log, then whether the op is usage. One table serves every
-- take (a library outlives its calls, and takes run one at a time) instead
-- of one per op: a take sets every slot it reads.
local PENDING = {}

-- take_distinct is take_general for ops on distinct keys, nearly every
-- request (one op, or descriptors that each count their own key): every
-- op reads its key's stored state, so there is no pending state to track
-- per key, only what the end writes.
-- pend keeps what decide_stored returned for op i (PENDING's slot j) to
-- write at the end.
local function pend(j, kind, x1, x2, x3, x4, now, kept, months)
  if kind == REGS then
    PENDING[j], PENDING[j + 1], PENDING[j + 2] = REGS, struct.pack(REGS_FORMAT, x1, x2, x3, x4), regs_ttl(x4, now)
  elseif kind == COUNT then
    PENDING[j], PENDING[j + 1], PENDING[j + 2] = COUNT, { a = x1, b = x2, c = x3, e = x4, m = months }, kept or false
  else
    PENDING[j], PENDING[j + 1], PENDING[j + 2] = LOG, x1, x2
  end
end

-- distinct_first is take_distinct's first pass: every op decided on its
-- key's stored state into out, its write kept in PENDING (or, for one op
-- the verdict cannot undo, made at once). It returns the verdict and
-- whether anything is pending.
local function distinct_first(now, keys, k0, ops, n, charges, out, refunded)
  local pending, verdict = false, verdict_new()
  for i = 1, n do
    local an, r, p, burst, refill, debt, h, packed = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
    local mode, usage, joined = mode_of(packed)
    local alg, ok, rem, reset, retry = ALGS[an], false, 0, 0, NEVER
    local code, j = nil, 4 * i - 3
    PENDING[j], PENDING[j + 3] = false, usage
    local refund = refunded and refunded[i]
    if refund then
      -- Done already (refund.lua), and kept whatever the verdict: as usage,
      -- phase 2 leaves its decision alone.
      ok, rem, reset, retry, PENDING[j + 3] = true, refund[1], refund[2], 0, true
      if refund[3] then code = LIFTED end
    elseif alg ~= nil then
      local key = keys[k0 + i]
      local x1, x2, x3, x4, forced, kept
      ok, rem, reset, retry, x1, x2, x3, x4, forced, kept =
        decide_stored(alg, an, r, p, burst, refill, debt, key, h, now, records(alg, usage, mode, h, r))
      if forced then code = RECORDED end
      if (ok and h > 0) or forced then
        if n == 1 and not charges and (ok or usage or mode == SHADOW) then
          -- One op that the batch's verdict cannot undo: write at once,
          -- there is nothing to keep for the end.
          write_state(alg.kind, key, x1, x2, x3, x4, now, kept, refill)
        else
          pend(j, alg.kind, x1, x2, x3, x4, now, kept, refill)
          pending = true
        end
      end
    end
    verdict_add(verdict, mode, joined, ok)
    local k = 4 * (i - 1)
    out[k + 1], out[k + 2], out[k + 3], out[k + 4] = code or (ok and ALLOWED or DENIED), rem, reset, retry
  end
  return verdict, pending
end

-- distinct_denied answers a denied batch, or the denials at out[d0 + 1 ..]
-- of an admitted one: only usage is written. Every other op is uncharged:
-- an allowed one reports what a check would, one recorded past its limit
-- its own denial. No op wrote yet, so the stored state is still each key's.
local function distinct_denied(now, keys, k0, ops, n, out, d0, admitted)
  for i = 1, n do
    local j, k = 4 * i - 3, 4 * (i - 1)
    if not PENDING[j + 3] and (out[k + 1] == ALLOWED or PENDING[j]) then
      local an, r, p, burst, refill, debt, h = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
      if out[k + 1] == ALLOWED then h = 0 end
      local ok, rem, reset, retry = decide_stored(ALGS[an], an, r, p, burst, refill, debt, keys[k0 + i], h, now, false)
      k = k + d0
      out[k + 1], out[k + 2], out[k + 3], out[k + 4] = ok and 1 or 0, rem, reset, retry
      if not admitted then PENDING[j] = false end
    end
  end
  if not admitted then
    for k = 1, d0 do out[k] = out[d0 + k] end
  end
end

-- distinct_write makes PENDING's writes, and appends their charges to out
-- when the batch was admitted and asked for them.
local function distinct_write(now, keys, k0, ops, n, out, charges)
  for i = 1, n do
    local j = 4 * i - 3
    local kind = PENDING[j]
    if kind == REGS then
      regs_put(keys[k0 + i], PENDING[j + 1], PENDING[j + 2])
    elseif kind == COUNT then
      local st = PENDING[j + 1]
      counter_put(keys[k0 + i], st.a, st.b, st.e, now, PENDING[j + 2], st.m)
    elseif kind == LOG then
      log_write(keys[k0 + i], PENDING[j + 1], PENDING[j + 2], now)
    end
    if kind and charges and not PENDING[j + 3] then
      local _, _, _, _, _, _, h = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
      local st = PENDING[j + 1]
      if kind == REGS then
        local a, b, c, e = struct.unpack(REGS_FORMAT, st)
        st = { a = a, b = b, c = c, e = e }
      end
      charge_of(out, kind, i, h, st, now)
    end
  end
end

local function take_distinct(now, keys, k0, ops, n, charges, denials, refunded)
  -- Sized for one op by its constructor: filling an empty table reallocates
  -- it at every power of two.
  local out = { 0, 0, 0, 0 }
  local verdict, pending = distinct_first(now, keys, k0, ops, n, charges, out, refunded)
  local admitted = admits(verdict)
  -- The denials go after the decisions: phase 2 writes them there when the
  -- batch is admitted (and changes nothing it writes), else it denies the
  -- batch in place and they copy its decisions.
  local d0 = 0
  if denials then
    d0 = 4 * n
    for k = 1, d0 do out[d0 + k] = out[k] end
  end
  if not admitted or denials then
    distinct_denied(now, keys, k0, ops, n, out, d0, admitted)
  end
  if pending then
    distinct_write(now, keys, k0, ops, n, out, charges and admitted)
  end
  return out
end

-- peek is the state an op of kind sees on rec without changing rec: the
-- running one, or (on a family switch, or before any op) as current would
-- make it.
local function peek(rec, kind, now, lim)
  if rec.kind == kind then
    return KINDS[kind].expire(rec.cur, now)
  elseif rec.kind == nil then
    return KINDS[kind].expire(original(rec, kind, now, lim), now)
  end
  return KINDS[kind].fresh(rec.key)
end

-- step decides op on rec's running state, recording it past its limit when
-- rec_past says so, and moves rec's state on.
local function step(op, rec_past, now)
  local rec, alg, h = op.rec, op.alg, op.h
  local st = current(rec, alg.kind, now, op.lim)
  local ok, rem, reset, retry, nst = decide(alg, op.lim, rec.key, st, h, now)
  local charged = ok and h > 0
  op.recorded = false
  if not ok and rec_past then
    op.taken = { rem, reset, retry }
    -- rem stays what was left before the hits (RECORDED).
    local _
    _, reset, retry, nst = record(alg, op.lim, rec.key, nst, h, now)
    charged, op.recorded = true, true
  end
  op.ok, op.rem, op.reset, op.retry = ok, rem, reset, retry
  rec.cur = nst
  if charged then
    rec.hit = true
    if op.usage then
      rec.usage = true
    else
      rec.hits, rec.last = (rec.hits or 0) + h, op.i
    end
  end
end

-- general_op decides op i of general_first on its key's running state.
local function general_op(ops, verdict, recs, order, key, i, lim, h, mode, usage, joined, now)
  local rec = recs[key]
  if rec == nil then
    rec = { key = key, orig = {}, typeok = {} }
    recs[key] = rec
    order[#order + 1] = rec
  end
  local alg = ALGS[lim.alg]
  local op = { i = i, rec = rec, lim = lim, h = h, alg = alg, usage = usage }
  ops[i] = op
  if alg == nil then
    op.ok, op.rem, op.reset, op.retry = false, 0, 0, NEVER
    -- algorithms.Take still drops an expired pending state.
    if rec.kind ~= nil then rec.cur = KINDS[rec.kind].expire(rec.cur, now) end
  else
    step(op, records(alg, usage, mode, h, lim.req), now)
  end
  verdict_add(verdict, mode, joined, op.ok)
end

-- general_first is take_general's first pass: each op decided on its key's
-- running state (recs, by key, in order of first use). It returns the ops
-- and the verdict.
local function general_first(now, keys, k0, ops_packed, n, recs, order, refunded)
  local ops, verdict = {}, verdict_new()
  for i = 1, n do
    local lim, h, packed = op_of(ops_packed, i)
    local mode, usage, joined = mode_of(packed)
    local refund = refunded and refunded[i]
    if refund then
      -- Done already (refund.lua): no key state to follow, and no alg, so
      -- that phase 2 leaves it alone.
      ops[i] = { i = i, ok = true, rem = refund[1], reset = refund[2], retry = 0, lifted = refund[3] }
      verdict_add(verdict, mode, joined, true)
    else
      general_op(ops, verdict, recs, order, keys[k0 + i], i, lim, h, mode, usage, joined, now)
    end
  end
  return ops, verdict
end


-- general_denied starts again from the stored states and records usage
-- only, as algorithms.TakeAll does for a denied batch: every other op is
-- uncharged, an allowed one reporting what a check would on its key's
-- running state, one recorded past its limit its own denial.
local function general_denied(now, order, ops)
  for _, rec in ipairs(order) do
    rec.kind, rec.cur, rec.hit, rec.hits, rec.usage = nil, nil, false, nil, nil
  end
  for _, op in ipairs(ops) do
    if op.alg ~= nil then
      if op.usage then
        -- A usage op denied with the whole request keeps that denial
        -- (algorithms.TakeAll), whatever its record says now.
        local ok, rem, reset, retry, recorded = op.ok, op.rem, op.reset, op.retry, op.recorded
        step(op, records(op.alg, true, ENFORCE, op.h, op.lim.req), now)
        if not ok then op.ok, op.rem, op.reset, op.retry, op.recorded = ok, rem, reset, retry, recorded end
      elseif op.ok then
        op.ok, op.rem, op.reset, op.retry = decide(op.alg, op.lim, op.rec.key, peek(op.rec, op.alg.kind, now, op.lim), 0, now)
      elseif op.taken then
        op.rem, op.reset, op.retry, op.recorded = op.taken[1], op.taken[2], op.taken[3], false
      end
    end
  end
end

-- general_kept saves (into nil) or restores (from kept) what the first
-- pass left on order's keys and ops: an admitted batch's denials are phase
-- 2 run on it, and put back after (nothing is written before).
local function general_kept(order, ops, kept)
  if kept == nil then
    kept = {}
    for x, rec in ipairs(order) do
      kept[x] = { rec.kind, rec.cur, rec.hit, rec.hits, rec.usage }
    end
    for i, op in ipairs(ops) do
      kept[#order + i] = { op.ok, op.rem, op.reset, op.retry, op.recorded }
    end
    return kept
  end
  for x, rec in ipairs(order) do
    local v = kept[x]
    rec.kind, rec.cur, rec.hit, rec.hits, rec.usage = v[1], v[2], v[3], v[4], v[5]
  end
  for i, op in ipairs(ops) do
    local v = kept[#order + i]
    op.ok, op.rem, op.reset, op.retry, op.recorded = v[1], v[2], v[3], v[4], v[5]
  end
end

-- decisions_of appends ops' decisions to out from out[at + 1].
local function decisions_of(out, at, ops)
  for i, op in ipairs(ops) do
    local k = at + (i - 1) * 4
    local code = op.ok and ALLOWED or DENIED
    if op.lifted then code = LIFTED elseif op.recorded then code = RECORDED end
    out[k + 1], out[k + 2], out[k + 3], out[k + 4] = code, op.rem, op.reset, op.retry
  end
end

-- take_general decides a batch whose ops may share keys: a key's later ops
-- see its earlier ops' pending state, as in algorithms.TakeAll.
local function take_general(now, keys, k0, ops_packed, n, charges, denials, refunded)
  local recs, order = {}, {}
  local ops, verdict = general_first(now, keys, k0, ops_packed, n, recs, order, refunded)
  local admitted = admits(verdict)
  local kept
  if denials and admitted then kept = general_kept(order, ops, nil) end
  if not admitted or kept then general_denied(now, order, ops) end
  local out = {}
  if denials then decisions_of(out, 4 * n, ops) end
  if kept then general_kept(order, ops, kept) end
  for _, rec in ipairs(order) do
    if rec.hit then
      KINDS[rec.kind].write(rec.key, rec.cur, rec.typeok[rec.kind], now)
    end
  end
  decisions_of(out, 0, ops)
  if admitted and charges then
    -- A key that usage also charged reports no charge: giving its other
    -- hits back could return what a bucket's floor absorbed of the usage
    -- (a denied cross-slot request then consumes them: under-admission).
    -- Nor does a key whose state ends in another family than its last
    -- charging op's (only a batch naming one key under two algorithms,
    -- which no config does): the charge's state would not be that op's.
    for _, rec in ipairs(order) do
      if rec.hits and not rec.usage and ops[rec.last].alg.kind == rec.kind then
        charge_of(out, rec.kind, rec.last, rec.hits, rec.cur, now)
      end
    end
  end
  return out
end

-- distinct reports whether no key repeats among keys[k0 + 1 .. k0 + n]:
-- by pairs for the few keys of nearly every take (interned strings compare
-- by address), where a set would cost a table and its growth.
local function distinct(keys, k0, n)
  if n <= 8 then
    for i = k0 + 2, k0 + n do
      local key = keys[i]
      for j = k0 + 1, i - 1 do
        if keys[j] == key then return false end
      end
    end
    return true
  end
  local seen = {}
  for i = k0 + 1, k0 + n do
    local key = keys[i]
    if seen[key] then return false end
    seen[key] = true
  end
  return true
end

-- packed lets a take reply one string (take_fixed's reply_of): take_many's
-- takes, whose replies only scripts.Decode reads.
local function take_keys(now, keys, k0, ops, n, charges, denials, packed)
  local d = distinct(keys, k0, n)
  -- take_fixed does not reply denials: a take that asks for them
  -- (redisstore's Cluster spread) is take_distinct's or take_general's.
  -- Nor refunds: it declines a take with any before reading a key.
  if not denials then
    local out = take_fixed(now, keys, k0, ops, n, charges, not d, packed)
    if out then return out end
  end
  -- Refunds first (refund.lua).
  local refunded = nil
  if refunds_in(ops, n) then refunded = refund_pass(now, keys, k0, ops, n) end
  if d then
    return take_distinct(now, keys, k0, ops, n, charges, denials, refunded)
  end
  return take_general(now, keys, k0, ops, n, charges, denials, refunded)
end

local function take_main()
  local now = now_of(ARGV[1])
  local n = #KEYS
  if #ARGV[2] ~= OP_BYTES * n then
    error('ratelimitd: ' .. #ARGV[2] .. ' bytes of ops for ' .. n .. ' keys, want ' .. OP_BYTES * n)
  end
  return take_keys(now, KEYS, 0, ARGV[2], n, #ARGV > 2, ARGV[3] == '2')
end

-- take_many runs several independent takes in one call: what a pipeline
-- of takes would do, for one entry into Redis and one TIME instead of one
-- per take (scripts.MergeTakes builds it, the coalescer sends it).
-- KEYS: every take's KEYS, in order. ARGV[1]: now in µs, or 0 for TIME;
-- then per take its ops (its ARGV[2]), which say how many KEYS are its,
-- followed by CHARGED ('1', its ARGV[3]) when it asks for its charges
-- (scripts.WithCharges; a take asking for denials is never merged). Ops
-- are a non-empty multiple of OP_BYTES, so the marker cannot be read as
-- ops, and a take without charges costs the call nothing more. Reply: per
-- take, the values take_main would give it alone (its decisions, then its
-- charges if it asked for them), as that array or, from take_fixed, packed
-- into one string (reply_of; scripts.Decode reads both), or an error reply
-- if it failed (every check and decision of a take runs before its first
-- write).
local CHARGED = '1'
local function take_many()
  local keys, args = KEYS, ARGV
  local now = now_of(args[1])
  -- Which KEYS are whose comes from the ops' lengths: check them all
  -- before any take runs, so a malformed one fails the call, not its
  -- neighbours' keys.
  local total, b, takes = 0, 2, 0
  while b <= #args do
    local bytes = #args[b]
    if bytes == 0 or bytes % OP_BYTES ~= 0 then
      error('ratelimitd: take ' .. (takes + 1) .. ' has ' .. bytes .. ' bytes of ops, not a multiple of ' .. OP_BYTES)
    end
    total, takes = total + bytes / OP_BYTES, takes + 1
    b = b + 1
    if args[b] == CHARGED then b = b + 1 end
  end
  if total ~= #keys then
    error('ratelimitd: ops for ' .. total .. ' keys, ' .. #keys .. ' KEYS')
  end
  local out, k0 = {}, 0
  b, takes = 2, 0
  while b <= #args do
    local ops = args[b]
    local n = #ops / OP_BYTES
    b = b + 1
    local charges = args[b] == CHARGED
    if charges then b = b + 1 end
    local ok, reply = pcall(take_keys, now, keys, k0, ops, n, charges, false, true)
    k0, takes = k0 + n, takes + 1
    if ok then
      out[takes] = reply
    else
      out[takes] = { err = tostring(reply) }
    end
  end
  return out
end

return take_main()
