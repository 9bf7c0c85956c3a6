-- take.lua: the driver. Decides every op of one request atomically and
-- all-or-nothing, exactly like algorithms.TakeAll, and reports what each op
-- applied (algorithms.Batch).
--
-- KEYS: one per op (a key may repeat; later ops see the earlier ops' state).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2]: every op, packed (limit.lua's OP_FORMAT, OP_BYTES each):
--   algorithm (0 = invalid limit), requests, period µs, burst, refill
--   interval µs (a window's calendar months, calendar.lua), max debt, hits,
--   mode (algorithms.Mode: 0/ENFORCE, SHADOW, QUOTA, SPARE, REFUND; plus
--   USAGE when the hits are usage, plus JOINED when the op is another limit
--   of the previous op's descriptor).
-- ARGV[3], if present: reply the charges too (scripts.WithCharges); if it
--   is 2, the denials too (scripts.WithDenials).
-- Reply, one request's section (take_many replies one per take), as an
--   array or, from take_fixed, packed into one string of little-endian
--   binary64 (reply_of: Redis answers one string for much less than a
--   table; scripts.Decode reads both): 5 values
--   per op: its code (DENIED, ALLOWED, LIFTED or RECORDED, below),
--   remaining, reset µs, retry µs (-1 = never) and what it applied; then, if ARGV[3] is 2, 5 more per op: the same had the
--   batch been denied (a denied batch's own again), for a Cluster slot
--   group whose request another group denies (redisstore's takeSpread);
--   then, if the batch was admitted and ARGV[3] asked for them, one charge
--   per key its ops but usage changed (charge_of): 7 values, plus 2 per
--   log entry added.
--
-- The first pass decides every op on its key's running state as if the
-- batch were admitted (usage, shadow and quota ops recorded past their
-- limits), writing nothing; an admitted batch then writes each changed
-- key's final state. The denied pass starts again from the stored states
-- and records usage only: a denied batch writes that, and it answers what
-- each op reports had the batch been denied. Refunds come first of all
-- (refund.lua). A spare op (a lease top-up) is taken only when it fits.
--
-- Scratch shared by every take (a library outlives its calls; takes run one
-- at a time and set every slot they read): FIRST[i] is the first op on op
-- i's key; TAKEN holds, from 3 * (i - 1), Take's own remaining, reset and
-- retry when op i was recorded past its limit (nil otherwise). KEY holds
-- KEYN slots per key, from KEYN * (f - 1) for its first op f: 1 a
-- counter's stored value when a write in its window keeps its TTL (else
-- false), 2 that window's end, 3 a log's typeok, 4 whether the batch
-- changed it, 5 whether an op named it under another limit, 6 what its ops
-- applied, 7 whether a usage op has hits there, 8 whether another op
-- applied some; its running state: 9 its kind (false while none was read;
-- PACKED once a unique register key's state is decided: packed at 10, its
-- TTL argument at 11), 10-13 its registers a, b, c, e, 14 a log's view, 15
-- a counter's months; and from 16 the same for the denied pass, then 23
-- whether it changed the key, 24 what it applied. SCRATCH takes a denied
-- pass's answers no reply holds.
local FIRST, TAKEN, KEY, KEYN, SCRATCH, PACKED = {}, {}, {}, 24, {}, 'packed'

-- An op's code in the reply (scripts.decodeAt): DENIED and ALLOWED; LIFTED
-- is a refund that gave room back to a counter with none left, which the
-- caller publishes to every replica's local cache (redisstore's notices);
-- RECORDED is a denial recorded past the limit anyway, whose remaining is
-- then what was left before its hits (algorithms.Decision.RemainingBefore;
-- after them nothing is).
local DENIED, ALLOWED, LIFTED, RECORDED = 0, 1, 2, 3

-- link sets FIRST for the ops on keys[k0 + 1 ..], refunds (which came
-- first, refund.lua) left out: by pairs for the few keys of nearly every
-- take (interned strings compare by address).
local function link(keys, k0, n, refunded)
  for i = 1, n do
    FIRST[i] = i
    if not (refunded and refunded[i]) then
      local key = keys[k0 + i]
      for j = i - 1, 1, -1 do
        if keys[k0 + j] == key and not (refunded and refunded[j]) then
          FIRST[i] = FIRST[j]
          break
        end
      end
    end
  end
end

-- load reads key's stored state as kind: a, b, c, e, then a log's view,
-- and what a write needs besides it: a counter's kept value (whose TTL a
-- write in its window keeps: counter_get's) or a log's typeok.
local function load(kind, key, p, months, now)
  if kind == REGS then
    local a, b, c, e = regs_get(key)
    return a, b, c, e, nil, nil
  elseif kind == COUNT then
    local a, b, c, e, kept = counter_get(key, p, months, now)
    return a, b, c, e, nil, kept
  end
  local view, typeok = log_load(key, now)
  return 0, 0, 0, 0, view, typeok
end

-- decide_regs mirrors algorithms.Take past the generic expiry (and, when
-- rec, Record) for an op of a register or counter algorithm, limit r, p,
-- cap, refill, debt and h hits: the state read as absent when out of the
-- algorithm's range, its take, and for a denial that rec records, force and
-- a check on the forced state. It returns ok, remaining, reset, retry, the
-- new state a, b, c, e, what it applied, whether it changed the state, and
-- Take's own remaining, reset and retry when it recorded. An op
-- is recorded past its limit when it has hits and its rate some (or its
-- algorithm counts at a zero rate: ALGS' zero, algorithms.Record), and it
-- is usage, or a shadow or quota op of the first pass (which assumes the
-- batch admitted).
local function decide_regs(alg, r, p, cap, refill, debt, a, b, c, e, h, now, rec)
  local ok, rem, reset, retry, applied, tr, ts, tt, _
  if r > 0 and not alg.valid(r, p, cap, refill, debt, a, b, c, now) then a, b, c, e = 0, 0, 0, 0 end
  ok, rem, reset, retry, a, b, c, e = alg.take(r, p, cap, refill, debt, a, b, c, e, h, now)
  if ok or not rec then return ok, rem, reset, retry, a, b, c, e, (ok and h or 0), ok and h > 0 end
  tr, ts, tt = rem, reset, retry
  a, b, c, e, applied = alg.force(r, p, cap, refill, debt, a, b, c, e, h, now)
  _, rem, reset, retry = alg.take(r, p, cap, refill, debt, a, b, c, e, 0, now)
  return false, rem, reset, retry, a, b, c, e, applied, true, tr, ts, tt
end

-- decide is decide_regs, and the same for a log's view (the state in
-- between): ok, remaining, reset, retry, a, b, c, e, view, applied,
-- changed, Take's own.
local function decide(alg, an, r, p, cap, refill, debt, a, b, c, e, view, h, now, rec)
  local ok, rem, reset, retry, applied, changed, tr, ts, tt, _
  if alg.kind ~= LOG then
    ok, rem, reset, retry, a, b, c, e, applied, changed, tr, ts, tt = decide_regs(alg, r, p, cap, refill, debt, a, b, c, e, h, now, rec)
    return ok, rem, reset, retry, a, b, c, e, nil, applied, changed, tr, ts, tt
  end
  local lim = limit_new(an, r, p, cap, refill, debt)
  if r > 0 and not alg.valid(lim, view, now) then view = log_fresh(view.key) end
  ok, rem, reset, retry, view = alg.take(lim, view, h, now)
  if ok or not rec then return ok, rem, reset, retry, 0, 0, 0, 0, view, (ok and h or 0), ok and h > 0 end
  tr, ts, tt = rem, reset, retry
  view, applied = alg.force(lim, view, h, now)
  _, rem, reset, retry = alg.take(lim, view, 0, now)
  return false, rem, reset, retry, 0, 0, 0, 0, view, applied, true, tr, ts, tt
end

-- running is the state an op of kind sees of its key (q: its KEY slots)
-- from its running state at q + s (s: 9, or 16 in the denied pass): that
-- state when of kind, the stored one when none was read yet, else fresh
-- (another family's reads as absent); expired, fresh. Unless peek (a
-- check, which moves nothing), the running state becomes that, and a load
-- notes, when notes, what a write of it needs.
local function running(q, s, kind, key, p, months, now, notes, peek)
  local K = KEY
  local have, a, b, c, e, view = K[q + s], 0, 0, 0, 0, nil
  if have == kind then
    a, b, c, e, view = K[q + s + 1], K[q + s + 2], K[q + s + 3], K[q + s + 4], K[q + s + 5]
  elseif have == false then
    local extra
    a, b, c, e, view, extra = load(kind, key, p, months, now)
    if notes and not peek and kind == COUNT then
      K[q + 1], K[q + 2] = extra or false, e
    elseif notes and not peek and kind == LOG then
      K[q + 3] = extra
    end
  elseif notes and not peek then
    -- Another family's state, read as absent: nothing of it is kept.
    K[q + 1], K[q + 3] = false, false
  end
  if not peek then K[q + s] = kind end
  if kind == LOG then
    return 0, 0, 0, 0, log_expire(view or log_fresh(key), now)
  elseif e ~= 0 and now >= e then
    return 0, 0, 0, 0, nil
  end
  return a, b, c, e, nil
end

-- same_limit reports whether ops i and j (of ops, packed) name one limit.
local function same_limit(ops, i, j)
  local x, y = OP_BYTES * (i - 1), OP_BYTES * (j - 1)
  return string.sub(ops, x + 1, x + 48) == string.sub(ops, y + 1, y + 48)
end

-- write_state writes a key's final state (q: its KEY slots) of kind:
-- registers, a counter (of months calendar months; its kept value's TTL
-- kept in the same window) or a log's view; one that no longer matters at
-- now is deleted.
local function write_state(key, q, kind, a, b, c, e, view, months, now)
  local K = KEY
  if kind == REGS then
    regs_set(key, a, b, c, e, now)
  elseif kind == COUNT then
    local kept = nil
    if K[q + 1] and K[q + 2] == e then kept = K[q + 1] end
    counter_put(key, a, b, e, now, kept, months)
  else
    log_write(key, view, K[q + 3], now)
  end
end

-- first decides op i (of ops, packed) on its key's running state (the
-- first pass) into out and the scratch and, when charges, counts it toward
-- its key's charge. once says the op is its take's only one and no charge
-- is asked for: a write the verdict cannot undo (the op allowed, usage, or
-- a shadow op) is then made at once; unique, that no key repeats. It
-- returns the op's mode, whether it is joined, and whether it wrote.
local function first(ops, i, key, now, out, charges, once, unique)
  local K = KEY
  local an, r, p, cap, refill, debt, h, packed = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
  local mode, usage, joined = mode_of(packed)
  local alg, f, k, t = ALGS[an], FIRST[i], 5 * i - 5, 3 * i - 3
  local q = KEYN * (f - 1)
  if cap == 0 then cap = r end
  if f == i then
    K[q + 4], K[q + 9] = false, false
    if charges then K[q + 5], K[q + 6], K[q + 7], K[q + 8] = false, 0, false, false end
  elseif charges and not same_limit(ops, f, i) then
    K[q + 5] = true
  end
  if alg == nil then
    TAKEN[t + 1] = nil
    -- algorithms.Take denies it, still dropping an expired running state.
    local kind = K[q + 9]
    if kind then
      K[q + 10], K[q + 11], K[q + 12], K[q + 13], K[q + 14] = running(q, 9, kind, key, p, refill, now)
    end
    out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5] = 0, 0, 0, NEVER, 0
    return mode, joined, false
  end
  local kind, rec = alg.kind, h > 0 and (r > 0 or alg.zero) and (usage or mode == SHADOW or mode == QUOTA)
  local ok, rem, reset, retry, applied, changed, a, b, c, e, view, tr, ts, tt
  if kind == REGS and K[q + 9] == false then
    -- running, inlined for a register key's first op: nearly every op of
    -- a register algorithm.
    K[q + 9] = REGS
    a, b, c, e = regs_get(key)
    if e ~= 0 and now >= e then a, b, c, e = 0, 0, 0, 0 end
    ok, rem, reset, retry, a, b, c, e, applied, changed, tr, ts, tt =
      decide_regs(alg, r, p, cap, refill, debt, a, b, c, e, h, now, rec)
  else
    if kind == LOG and K[q + 9] == false then
      -- running, inlined for a log's first op.
      view, K[q + 3] = log_load(key, now)
      K[q + 9], a, b, c, e, view = LOG, 0, 0, 0, 0, log_expire(view, now)
    else
      a, b, c, e, view = running(q, 9, kind, key, p, refill, now, true, false)
    end
    ok, rem, reset, retry, a, b, c, e, view, applied, changed, tr, ts, tt =
      decide(alg, an, r, p, cap, refill, debt, a, b, c, e, view, h, now, rec)
  end
  TAKEN[t + 1] = tr
  if tr then
    -- Recorded past the limit: what was left before its hits.
    TAKEN[t + 2], TAKEN[t + 3] = ts, tt
    out[k + 1], out[k + 2] = RECORDED, tr
  else
    out[k + 1], out[k + 2] = ok and ALLOWED or DENIED, rem
  end
  out[k + 3], out[k + 4], out[k + 5] = reset, retry, applied
  if changed and once and (ok or usage or mode == SHADOW) then
    -- Nothing else reads the key's state: it is written as it stands.
    write_state(key, q, kind, a, b, c, e, view, refill, now)
    return mode, joined, true
  end
  if changed and unique and kind == REGS and not charges then
    -- Nothing but its write reads it: packed for it now.
    K[q + 9], K[q + 10], K[q + 11], K[q + 4] = PACKED, struct.pack(REGS_FORMAT, a, b, c, e), regs_ttl(e, now), true
    return mode, joined, false
  end
  K[q + 10], K[q + 11], K[q + 12], K[q + 13], K[q + 14], K[q + 15] = a, b, c, e, view, refill
  if changed then K[q + 4] = true end
  if charges then
    if usage and h > 0 then K[q + 7] = true end
    if applied > 0 then
      K[q + 6] = K[q + 6] + applied
      if not usage then K[q + 8] = true
      elseif view then view.pend[#view.pend].usage = true end
    end
  end
  return mode, joined, false
end

-- denied is the denied pass, from the first pass's answers in out into
-- dst from dst[d0 + 1] (5 values per op, as out): the stored states again,
-- usage recorded on them (a denied usage op keeps its first pass's
-- denial), an allowed op answering a check on its key's state there and a
-- denied one Take's own denial; refunds as in the first pass. writes says
-- its writes will be made (a denied batch): what a load reads besides the
-- state is then the one they need.
local function denied(ops, keys, k0, n, out, dst, d0, refunded, now, writes)
  local K = KEY
  for i = 1, n do
    local k, j, t, f = d0 + 5 * i - 5, 5 * i - 5, 3 * i - 3, FIRST[i]
    local q, refund, ok1 = KEYN * (f - 1), refunded and refunded[i], out[j + 1]
    dst[k + 1], dst[k + 2], dst[k + 3], dst[k + 4], dst[k + 5] = ok1, out[j + 2], out[j + 3], out[j + 4], out[j + 5]
    if f == i then K[q + 16], K[q + 23], K[q + 24] = false, false, 0 end
    local an, r, p, cap, refill, debt, h, packed = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
    local mode, usage = mode_of(packed)
    local alg = ALGS[an]
    if cap == 0 then cap = r end
    if not refund then dst[k + 5] = 0 end
    if refund or alg == nil then
      -- As in the first pass.
    elseif usage or ok1 == ALLOWED then
      local a, b, c, e, view = running(q, 16, alg.kind, keys[k0 + i], p, refill, now, writes, not usage)
      if not usage then h = 0 end
      local ok, rem, reset, retry, applied, changed, tr
      ok, rem, reset, retry, a, b, c, e, view, applied, changed, tr =
        decide(alg, an, r, p, cap, refill, debt, a, b, c, e, view, h, now, usage and h > 0 and (r > 0 or alg.zero))
      if ok1 == ALLOWED and tr then
        dst[k + 1], dst[k + 2], dst[k + 3], dst[k + 4] = RECORDED, tr, reset, retry
      elseif ok1 == ALLOWED then
        dst[k + 1], dst[k + 2], dst[k + 3], dst[k + 4] = ok and ALLOWED or DENIED, rem, reset, retry
      end
      if usage then
        K[q + 17], K[q + 18], K[q + 19], K[q + 20], K[q + 21], K[q + 22] = a, b, c, e, view, refill
        K[q + 23], K[q + 24], dst[k + 5] = K[q + 23] or changed, K[q + 24] + applied, applied
      end
    elseif TAKEN[t + 1] ~= nil then
      -- Take's own denial: not recorded in a denied batch.
      dst[k + 1], dst[k + 2], dst[k + 3], dst[k + 4] = DENIED, TAKEN[t + 1], TAKEN[t + 2], TAKEN[t + 3]
    end
  end
end

-- charge_of appends to out the charge of key f (its first op;
-- scripts.Charge): f, what the batch applied there but its usage (less
-- what a denied batch's usage would apply more), and the state written: a,
-- b, c, e and no entries for registers; now, 0, 0, ExpiresAt and the (seq,
-- hits) of each entry its ops but usage added for a log. Nothing when that
-- is nothing.
local function charge_of(out, f, now)
  local K = KEY
  local q, m = KEYN * (f - 1), #out
  if K[q + 9] == LOG then
    local view, n, applied = K[q + 14], 0, 0
    for _, e in ipairs(view.pend) do
      if not e.usage then
        n, applied = n + 1, applied + e.hits
        out[m + 6 + 2 * n], out[m + 7 + 2 * n] = e.seq, e.hits
      end
    end
    if applied > 0 then
      out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5], out[m + 6], out[m + 7] = f, applied, now, 0, 0, view.exp, n
    end
    return
  end
  local applied, a, b, c, e = K[q + 6], K[q + 10], K[q + 11], K[q + 12], K[q + 13]
  if K[q + 7] then applied = applied - math.min(applied, K[q + 24]) end
  if e <= now then a, b, c, e = 0, 0, 0, 1 end -- written as deleted (algorithms' settle)
  if applied > 0 then
    out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5], out[m + 6], out[m + 7] = f, applied, a, b, c, e, 0
  end
end

-- verdict_new is algorithms.Verdict: the counts the batch rule needs, fed
-- op by op in batch order by verdict_add. One table, reset here, serves
-- every take.
local VERDICT = {}
local function verdict_new()
  local v = VERDICT
  v.enforced_denied, v.quota_ops, v.quota_denied, v.in_quota, v.alt_denied = false, 0, 0, false, false
  return v
end

-- verdict_add counts one op. A quota alternative is a quota op with the
-- joined quota ops after it (one descriptor's limits), denied when any
-- of them is; shadow, spare and refund ops never deny.
local function verdict_add(v, mode, joined, ok)
  if mode ~= QUOTA then
    v.in_quota = false
    if mode ~= SHADOW and mode ~= SPARE and mode ~= REFUND and not ok then v.enforced_denied = true end
    return
  end
  if not joined or not v.in_quota then
    v.quota_ops, v.alt_denied = v.quota_ops + 1, false
  end
  v.in_quota = true
  if not ok and not v.alt_denied then
    v.alt_denied, v.quota_denied = true, v.quota_denied + 1
  end
end

-- take_general decides n ops (OP_BYTES each in ops) on keys[k0 + 1 ..]
-- (unique: no key repeats): refunds first, the first pass, the verdict
-- (no enforced op denied, and not every quota alternative denied), then
-- what the outcome writes, the denied pass where a denied batch, the
-- denials or a charge needs it, and the charges.
local function take_general(now, keys, k0, ops, n, charges, denials, unique)
  local K = KEY
  local refunded = nil
  if refunds_in(ops, n) then refunded = refund_pass(now, keys, k0, ops, n) end
  if unique then
    for i = 1, n do FIRST[i] = i end
  else
    link(keys, k0, n, refunded)
  end
  local out, verdict, both, wrote = out_for(n, false), verdict_new(), false, false
  for i = 1, n do
    local refund, k, mode, joined = refunded and refunded[i], 5 * i - 5, REFUND, false
    if refund then
      out[k + 1], out[k + 2], out[k + 3], out[k + 4], out[k + 5] = refund[4] and LIFTED or ALLOWED, refund[1], refund[2], 0, refund[3]
    else
      mode, joined, wrote = first(ops, i, keys[k0 + i], now, out, charges, n == 1 and not charges, unique)
      if charges then
        local q = KEYN * (FIRST[i] - 1)
        both = both or (K[q + 7] and K[q + 8])
      end
    end
    verdict_add(verdict, mode, joined, out[k + 1] ~= DENIED and out[k + 1] ~= RECORDED)
  end
  if wrote then return out end -- one op, written at once: its verdict's either way
  local admitted = not verdict.enforced_denied and not (verdict.quota_ops > 0 and verdict.quota_denied == verdict.quota_ops)
  if not admitted then
    -- (One op that wrote at once is its denied pass's own: usage.)
    denied(ops, keys, k0, n, out, out, 0, refunded, now, true)
    if denials then for x = 1, 5 * n do out[5 * n + x] = out[x] end end
  elseif denials then
    denied(ops, keys, k0, n, out, out, 5 * n, refunded, now, false)
  elseif charges and both then
    -- Only for what the usage applies there (charge_of).
    denied(ops, keys, k0, n, out, SCRATCH, 0, refunded, now, false)
  end
  for i = 1, n do
    local q = KEYN * (i - 1)
    if FIRST[i] == i and not (refunded and refunded[i]) then
      if admitted and K[q + 4] and K[q + 9] == PACKED then
        regs_put(keys[k0 + i], K[q + 10], K[q + 11])
      elseif admitted and K[q + 4] then
        write_state(keys[k0 + i], q, K[q + 9], K[q + 10], K[q + 11], K[q + 12], K[q + 13], K[q + 14], K[q + 15], now)
      elseif not admitted and K[q + 23] then
        write_state(keys[k0 + i], q, K[q + 16], K[q + 17], K[q + 18], K[q + 19], K[q + 20], K[q + 21], K[q + 22], now)
      end
      if admitted and charges and K[q + 8] and not K[q + 5] then charge_of(out, i, now) end
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

-- take_keys is one take: take_fixed's, when every op is its (it declines a
-- take that asks for denials, or holds a refund, before reading a key),
-- else take_general's.
local function take_keys(now, keys, k0, ops, n, charges, denials)
  local d = distinct(keys, k0, n)
  if not denials then
    local out = take_fixed(now, keys, k0, ops, n, charges, not d)
    if out then return out end
  end
  return take_general(now, keys, k0, ops, n, charges, denials, d)
end

local function take_main()
  local now = now_of(ARGV[1])
  local n = #KEYS
  if #ARGV[2] ~= OP_BYTES * n then
    error('ratelimitd: ' .. #ARGV[2] .. ' bytes of ops for ' .. n .. ' keys, want ' .. OP_BYTES * n)
  end
  return take_keys(now, KEYS, 0, ARGV[2], n, #ARGV > 2, ARGV[3] == '2')
end

return take_main()
