-- take_fixed.lua: take.lua's fast path, for its commonest batch: every op a
-- plain fixed_window enforce op, mode 0 or ENFORCE (joined or not; no
-- usage, shadow or quota), no burst, refill or debt. Same decisions,
-- amounts applied, writes and charges as take_general
-- (TestFixedWindowFastPath compares them bit for bit), for less of what a
-- busy service pays most for, Redis
-- CPU per decision: one MGET reads every key of a batch (a key of another
-- type reads as absent, as counter_get's GET does); fixed_window's take is
-- inlined on the stored count (counter.lua's layout); the decoded ops, the
-- window, its tag and the strings written in it are kept across takes (the
-- takes merged into one call share now, and nearly all repeat their ops
-- and windows); a key already in its window is moved by INCRBY, keeping
-- its TTL (counter_put); and a take of at most PACK_MAX ops replies one
-- string (reply_of).
--
-- Spare ops (pkg/store/lease's blocks) are its too. A lease top-up is a
-- SPARE op right after a plain op (not itself a top-up) on the same key
-- under the same limit (as leases send it; under another, the stored state
-- it would read in a denied batch is not the one checked for the op before
-- it). It is decided on the state that op left, as take_general would: it
-- never denies the batch, is taken only if it fits, and the key is written
-- once, its charge summing both ops' hits. Any other SPARE op (the lease
-- sweeper's refills, a batch of them on distinct keys) is decided on its
-- key's stored state like a plain op, but never denies the batch. repeats
-- says keys repeat: then only as top-ups, or take_general decides the batch.
--
-- take_fixed returns nil when any op is anything else (take_general then
-- decides the batch), having read no key unless only a top-up's place or
-- key was wrong.

-- REPLY holds a packed reply's values; PACK_FORMATS[m] is the format of m.
-- Past PACK_MAX ops a take replies a table: unpack's stack has a bound.
local REPLY, PACK_FORMATS, PACK_MAX = {}, {}, 16

-- FW holds each op's outcome until the batch is decided, FW_STRIDE slots per
-- op, one table for every take (takes run one at a time, and a take sets
-- every slot it reads): whether it writes, the stored value when it is the
-- op's window's (counter_of's: the write INCRBYs it) or false, the count it
-- leaves, the remaining a check on the stored state reports (a denied
-- batch's answer for an allowed op), whether it is a top-up, and its window.
-- (take_many's batch_plain keeps 3 slots per op in it.)
local FW, FW_STRIDE = {}, 6

-- OPS[ops] is a take's ops string decoded for take_fixed, or false when
-- some op is neither plain nor Spare: per op requests, period, hits and
-- whether it is Spare, and (t.spare) whether any is. A lookup of the
-- interned string costs a fraction of struct.unpack. At most CACHE_MAX
-- takes of at most PACK_MAX ops; then it starts over (so do the other
-- caches at theirs).
local OPS, OPS_N, CACHE_MAX = {}, 0, 1024

local function ops_of(ops, n)
  local t = OPS[ops]
  if t ~= nil then return t end
  for i = 1, n do
    local an, r, p, burst, refill, debt, h, mode = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
    if mode >= JOINED then mode = mode - JOINED end
    if an ~= FIXED_WINDOW or burst ~= 0 or refill ~= 0 or debt ~= 0
      or not (mode == 0 or mode == ENFORCE or mode == SPARE) then
      t = false
      break
    end
    t = t or {}
    t[4 * i - 3], t[4 * i - 2], t[4 * i - 1], t[4 * i] = r, p, h, mode == SPARE
    if mode == SPARE then t.spare = true end
  end
  if n <= PACK_MAX then
    if OPS_N >= CACHE_MAX then OPS, OPS_N = {}, 0 end
    OPS[ops], OPS_N = t, OPS_N + 1
  end
  return t
end

-- A window is what take_fixed knows of one period's current window: its
-- start, end and tag (counter_tag), and its value strings both ways:
-- vals[count], the value a SET of that count writes in it, and
-- count[value], for the values of its tag read (nearly every value read
-- in a window is one of a few counts: a lookup instead of counter_value).
-- WINDOWS[period] is the last window seen of each period (at most
-- WINDOWS_MAX periods); WIN, of the last (now, period). A window holds at
-- most WINDOW_VALUES strings each way.
local WINDOWS, WINDOWS_N, WINDOWS_MAX, WINDOW_VALUES = {}, 0, 32, 512
local WIN_NOW, WIN_P, WIN = -1, 0, nil

local function window_of(now, p)
  local _, off = divmod(now, p)
  local start = now - off
  local w = WINDOWS[p]
  if w == nil or w.start ~= start then
    if w == nil then
      if WINDOWS_N >= WINDOWS_MAX then WINDOWS, WINDOWS_N = {}, 0 end
      WINDOWS_N = WINDOWS_N + 1
    end
    w = { start = start, e = start + p, tag = counter_tag(start, start + p, 0), vals = {}, n = 0, count = {}, m = 0 }
    WINDOWS[p] = w
  end
  WIN, WIN_P, WIN_NOW = w, p, now
  return w
end

-- value_of is the value string of count b in window w: SET's argument
-- (counter_put's int(v), without formatting it again).
local function value_of(w, b)
  local s = w.vals[b]
  if s == nil then
    if w.n >= WINDOW_VALUES then w.vals, w.n = {}, 0 end
    s = int(b * COUNT_TAGS + w.tag)
    w.vals[b], w.n = s, w.n + 1
  end
  return s
end

-- INCRS[d] is INCRBY's argument for a count that moved by d.
local INCRS, INCRS_N = {}, 0
local function incr_of(d)
  local s = INCRS[d]
  if s == nil then
    if INCRS_N >= CACHE_MAX then INCRS, INCRS_N = {}, 0 end
    s = int(d * COUNT_TAGS)
    INCRS[d], INCRS_N = s, INCRS_N + 1
  end
  return s
end

-- stored_count is what fixed_window counts of the stored value v in window
-- w under r requests (decide_stored's checks: counter_of, then the range
-- check, fixed_window_valid, and fixed_window's own: a positive count),
-- and the value a write then INCRBYs (counter_of's kept) or false.
local function stored_count(v, w, r)
  local b = w.count[v]
  if b == nil then
    local n = counter_value(v)
    if n == nil then return 0, false end
    local tag = n % COUNT_TAGS
    if tag ~= w.tag then return 0, false end
    b = (n - tag) / COUNT_TAGS
    if w.m >= WINDOW_VALUES then w.count, w.m = {}, 0 end
    w.count[v], w.m = b, w.m + 1
  end
  local n = b * COUNT_TAGS + w.tag
  if b > 0 and (r == 0 or b <= MAX_COUNT) then return b, n end
  return 0, n
end

-- The TTL argument of the last (now, ExpiresAt).
local TTL_NOW, TTL_E, TTL = -1, 0, ''

-- reply_of is a take's reply of m values in out: the table itself, or,
-- packed, one string of little-endian binary64 (scripts.Decode reads both),
-- which Redis answers for much less than m integers.
local function reply_of(out, m, packed)
  if not packed then return out end
  local f = PACK_FORMATS[m]
  if f == nil then
    f = '<' .. string.rep('d', m)
    PACK_FORMATS[m] = f
  end
  return struct.pack(f, unpack(out, 1, m))
end

-- out_for is the table a take's decisions go in: REPLY when packed (it is
-- read before the next take), else one sized for the commonest batches by
-- its constructor (filling an empty table reallocates at every power of 2).
local function out_for(n, packed)
  if packed then
    return REPLY
  elseif n == 1 then
    return { 0, 0, 0, 0, 0 }
  elseif n == 2 then
    return { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  elseif n == 3 then
    return { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  end
  return {}
end

-- fixed_decide decides op i of take_fixed's batch (t: its decoded ops) on
-- v, its key's stored value (unread for a top-up), into FW and out (its 5
-- values from o0 + 5 * (i - 1) + 1). It returns whether the op denies the
-- batch, or nil when the op is a Spare op on the key of the op before it
-- that is no top-up (take_fixed then declines the batch), or a key repeats
-- otherwise (seen: the keys so far).
local function fixed_decide(t, i, keys, k0, v, now, out, seen, o0)
  local fw, j, q, o = FW, FW_STRIDE * (i - 1), 4 * (i - 1), o0 + 5 * (i - 1)
  local r, p, h, topup, spare = t[q + 1], t[q + 2], t[q + 3], false, t[q + 4]
  if spare and i > 1 and keys[k0 + i] == keys[k0 + i - 1] then
    -- A top-up, or not take_fixed's: right after a plain op on its key
    -- under its limit.
    if t[q] or t[q - 3] ~= r or t[q - 2] ~= p then return nil end
    topup = true
  end
  if seen and not topup then
    -- Every key but a top-up's is another.
    local key = keys[k0 + i]
    if seen[key] then return nil end
    seen[key] = true
  end
  local w = WIN
  if p ~= WIN_P or now ~= WIN_NOW then w = window_of(now, p) end
  local count, kept
  if topup then
    -- The count its op left (the window's: the same limit); out of range,
    -- a fresh state's.
    count, kept = fw[j - FW_STRIDE + 3], fw[j - FW_STRIDE + 2]
    if r > 0 and count > MAX_COUNT then count = 0 end
    fw[j + 4] = fw[j - FW_STRIDE + 4]
  else
    count, kept = stored_count(v, w, r)
    fw[j + 4] = r - count
  end
  local reset, room, denies = w.e - now, r - count, false
  if room < 0 or h > room then
    denies = not spare
    local retry = reset
    if h > r then retry = NEVER end
    if room < 0 then room = 0 end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, room, reset, retry, 0
    fw[j + 1] = false
  else
    count = count + h
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, r - count, reset, 0, h
    fw[j + 1] = h > 0
  end
  fw[j + 2], fw[j + 3], fw[j + 5], fw[j + 6] = kept, count, topup, w
  return denies
end

-- fixed_write writes the key of op i of an admitted take_fixed batch (t:
-- its decoded ops; FW: its outcome) and appends its charge at out[m + 1]
-- if charges; it returns the new m.
local function fixed_write(t, i, keys, k0, now, out, m, charges)
  local fw, j = FW, FW_STRIDE * (i - 1)
  local w, count, kept = fw[j + 6], fw[j + 3], fw[j + 2]
  local e = w.e
  if kept then
    counter_incr(keys[k0 + i], incr_of(count - (kept - w.tag) / COUNT_TAGS))
  else
    if e ~= TTL_E or now ~= TTL_NOW then
      TTL, TTL_E, TTL_NOW = ttl_arg(e, now), e, now
    end
    counter_set(keys[k0 + i], value_of(w, count), TTL)
  end
  if charges then
    -- charge_of of a counter, named by its key's first op; an admitted
    -- batch allowed the op before a top-up: it applied its hits, if any.
    local q, first = 4 * (i - 1), i
    local hits = t[q + 3]
    if fw[j + 5] then hits, first = hits + t[q - 1], i - 1 end
    out[m + 1], out[m + 2], out[m + 3], out[m + 4] = first, hits, w.start, count
    out[m + 5], out[m + 6], out[m + 7] = 0, e, 0
    m = m + 7
  end
  return m
end

local function take_fixed(now, keys, k0, ops, n, charges, repeats)
  local t = ops_of(ops, n)
  if not t then
    return nil
  end
  -- One op reads with GET (no reply table), as counter_get does.
  local vals, v
  if n == 1 then
    v = redis.pcall('GET', keys[k0 + 1])
  else
    vals = redis.call('MGET', unpack(keys, k0 + 1, k0 + n))
  end
  local packed = n <= PACK_MAX
  local out, admitted, seen = out_for(n, packed), true, nil
  if repeats then seen = {} end
  for i = 1, n do
    if vals then v = vals[i] end
    local denies = fixed_decide(t, i, keys, k0, v, now, out, seen, 0)
    if denies == nil then return nil end
    if denies then admitted = false end
  end
  if not admitted then
    -- Nothing is written or applied; an allowed op reports what a check
    -- would on its stored state, a denied one its own denial.
    for i = 1, n do
      local o = 5 * (i - 1)
      if out[o + 1] == 1 then out[o + 2], out[o + 5] = FW[FW_STRIDE * (i - 1) + 4], 0 end
    end
    return reply_of(out, 5 * n, packed)
  end
  local m, fw = 5 * n, FW
  for i = 1, n do
    local j = FW_STRIDE * (i - 1)
    -- A key is written once: by its top-up if that charged it (on the
    -- state its op left, charging both ops' hits), else by its op.
    if fw[j + 1] and not (repeats and i < n and fw[j + FW_STRIDE + 5] and fw[j + FW_STRIDE + 1]) then
      m = fixed_write(t, i, keys, k0, now, out, m, charges)
    end
  end
  return reply_of(out, m, packed)
end
