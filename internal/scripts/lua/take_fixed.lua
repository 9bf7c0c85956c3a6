-- take_fixed.lua: take.lua's fast path, for its commonest batch: every op a
-- plain fixed_window enforce op, mode 0 or ENFORCE (joined or not; no
-- usage, shadow or quota), no burst, refill or debt. Same decisions,
-- writes and charges as take_distinct (TestFixedWindowFastPath compares
-- them bit for bit), for less of what a busy service pays most for, Redis
-- CPU per decision: one MGET reads every key of a batch (a key of another
-- type reads as absent, as regs_get's GET does); fixed_window's take is
-- inlined, and of a stored state only the count it would use is kept; the
-- decoded ops, the window start, the TTL argument and the state strings of
-- the current windows are kept across takes (the takes merged into one call
-- share now, and nearly all repeat their ops and windows); a key whose
-- state is already its window's gets only its count rewritten
-- (regs_put_count); and a merged take (packed) replies one string.
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
-- take_fixed returns nil when any op is anything else (take_distinct, or
-- take_general when keys repeat, decides the batch), having read no key
-- unless only a top-up's place or key was wrong.

-- REPLY holds a packed reply's values; PACK_FORMATS[m] is the format of m.
-- Past PACK_MAX ops a take replies a table: unpack's stack has a bound.
local REPLY, PACK_FORMATS, PACK_MAX = {}, {}, 16

-- FW holds each op's outcome until the batch is decided, FW_STRIDE slots per
-- op, one table for every take (takes run one at a time, and a take sets
-- every slot it reads): whether it writes, whether the stored state is its
-- window's (regs_put_count's), the count it leaves, the remaining a check
-- on the stored state reports (a denied batch's answer for an allowed op),
-- whether it is a top-up, and its window.
local FW, FW_STRIDE = {}, 6

-- OPS[ops] is a take's ops string decoded for take_fixed, or false when
-- some op is neither plain nor Spare: per op
-- requests, period, hits and whether it is Spare, and whether any is. A
-- lookup of the interned string costs a fraction of struct.unpack. At most
-- CACHE_MAX takes of at most PACK_MAX ops; then it starts over (so do the
-- other caches at theirs).
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
  end
  if n <= PACK_MAX then
    if OPS_N >= CACHE_MAX then OPS, OPS_N = {}, 0 end
    OPS[ops], OPS_N = t, OPS_N + 1
  end
  return t
end

-- A window is what take_fixed knows of one period's current window: its
-- start and end, and the state strings of its counts both ways
-- (packed[count], count[string]), for the states this window's writes
-- leave, which are nearly every state read: a lookup instead of
-- struct.unpack. WINDOWS[period] is the last window seen of each period (at
-- most WINDOWS_MAX periods); WIN, of the last (now, period). A window holds
-- at most WINDOW_STATES states.
local WINDOWS, WINDOWS_N, WINDOWS_MAX, WINDOW_STATES = {}, 0, 32, 512
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
    w = { start = start, e = start + p, packed = {}, count = {}, n = 0 }
    WINDOWS[p] = w
  end
  WIN, WIN_P, WIN_NOW = w, p, now
  return w
end

-- COUNTS[b] is the packed count b, for regs_put_count.
local COUNTS, COUNTS_N = {}, 0
local function count_bytes(b)
  local s = COUNTS[b]
  if s == nil then
    if COUNTS_N >= CACHE_MAX then COUNTS, COUNTS_N = {}, 0 end
    s = struct.pack('<d', b)
    COUNTS[b], COUNTS_N = s, COUNTS_N + 1
  end
  return s
end

-- count_seen notes that v is the state of count b in window w.
local function count_seen(w, v, b)
  if w.n >= WINDOW_STATES then
    w.packed, w.count, w.n = {}, {}, 0
  end
  w.count[v], w.n = b, w.n + 1
end

-- state_of is the packed state of count b in window w.
local function state_of(w, b)
  local s = w.packed[b]
  if s == nil then
    s = struct.pack(REGS_FORMAT, w.start, b, 0, w.e)
    if w.n >= WINDOW_STATES then
      w.packed, w.count, w.n = {}, {}, 0
    end
    w.packed[b], w.count[s], w.n = s, b, w.n + 1
  end
  return s
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

local function take_fixed(now, keys, k0, ops, n, charges, repeats, packed)
  local t = ops_of(ops, n)
  if not t then
    return nil
  end
  -- One op reads with GET (no reply table), as regs_get does.
  local vals, v
  if n == 1 then
    v = redis.pcall('GET', keys[k0 + 1])
  else
    vals = redis.call('MGET', unpack(keys, k0 + 1, k0 + n))
  end
  packed = packed and n <= PACK_MAX
  local out = REPLY
  if packed then
  elseif n == 1 then
    out = { 0, 0, 0, 0 }
  elseif n == 2 then
    out = { 0, 0, 0, 0, 0, 0, 0, 0 }
  elseif n == 3 then
    out = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  else
    out = {}
  end
  local fw, admitted, seen = FW, true, nil
  if repeats then seen = {} end
  for i = 1, n do
    local j, q = FW_STRIDE * (i - 1), 4 * (i - 1)
    local r, p, h, topup, spare = t[q + 1], t[q + 2], t[q + 3], false, t[q + 4]
    if spare and i > 1 and keys[k0 + i] == keys[k0 + i - 1] then
      -- A Spare op on the key of the op before it is a top-up, or not
      -- take_fixed's: right after a plain op on its key under its limit.
      if t[q] or t[q - 3] ~= r or t[q - 2] ~= p then
        return nil
      end
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
    local start = w.start
    -- count is what fixed_window would count of the state the op reads
    -- (decide_stored's expiry and range checks, fixed_window_valid), which
    -- is all it uses of it.
    local count, same = 0, false
    if topup then
      -- The count its op left (the window's: the same limit); out of
      -- range, a fresh state's.
      count, same = fw[j - FW_STRIDE + 3], fw[j - FW_STRIDE + 2]
      if r > 0 and count > MAX_COUNT then count = 0 end
      fw[j + 4] = fw[j - FW_STRIDE + 4]
    else
      if vals then v = vals[i] end
      local b = w.count[v]
      if b ~= nil then
        -- The state this window's writes leave: exact and live, and its
        -- TTL already the one a write of this window sets.
        same = true
        if b > 0 and (b <= MAX_COUNT or (r == 0 and b <= TWO53)) then count = b end
      elseif type(v) == 'string' and #v == REGS_BYTES then
        local a, c, e
        a, b, c, e = struct.unpack(REGS_FORMAT, v)
        if a == start then
          if c == 0 and e == start + p then
            -- Not -0, nor a start of 0: bytes a write of the window's
            -- next count keeps but for that count.
            same = start > 0 and 1 / c > 0
            if b > 0 and b % 1 == 0 and (b <= MAX_COUNT or (r == 0 and b <= TWO53)) then
              count = b
              if same then count_seen(w, v, b) end
            end
          elseif b > 0 and regs_exact(a, b, c, e) and (e == 0 or now < e) and (r == 0 or b <= MAX_COUNT) then
            count = b
          end
        end
      end
      fw[j + 4] = r - count
    end
    local reset, room = start + p - now, r - count
    if room < 0 or h > room then
      if not spare then admitted = false end
      local retry = reset
      if h > r then retry = NEVER end
      if room < 0 then room = 0 end
      out[q + 1], out[q + 2], out[q + 3], out[q + 4] = 0, room, reset, retry
      fw[j + 1] = false
    else
      count = count + h
      out[q + 1], out[q + 2], out[q + 3], out[q + 4] = 1, r - count, reset, 0
      fw[j + 1] = h > 0
    end
    fw[j + 2], fw[j + 3], fw[j + 5], fw[j + 6] = same, count, topup, w
  end
  if not admitted then
    -- Nothing is written; an allowed op reports what a check would on its
    -- stored state, a denied one its own denial.
    for i = 1, n do
      local q = 4 * (i - 1)
      if out[q + 1] == 1 then out[q + 2] = fw[FW_STRIDE * (i - 1) + 4] end
    end
    return reply_of(out, 4 * n, packed)
  end
  local m = 4 * n
  for i = 1, n do
    local j = FW_STRIDE * (i - 1)
    -- A key is written once: by its top-up if that charged it (on the
    -- state its op left, charging both ops' hits), else by its op.
    if fw[j + 1] and not (repeats and i < n and fw[j + FW_STRIDE + 5] and fw[j + FW_STRIDE + 1]) then
      local w = fw[j + 6]
      local e = w.e
      if fw[j + 2] then
        regs_put_count(keys[k0 + i], count_bytes(fw[j + 3]))
      else
        local st = state_of(w, fw[j + 3])
        if e ~= TTL_E or now ~= TTL_NOW then
          TTL, TTL_E, TTL_NOW = ttl_arg(e, now), e, now
        end
        regs_put(keys[k0 + i], st, TTL)
      end
      if charges then
        -- charge_of of a register state; an admitted batch allowed the op
        -- before a top-up: it charged its hits, if any.
        local q = 4 * (i - 1)
        local hits = t[q + 3]
        if fw[j + 5] then hits = hits + t[q - 1] end
        out[m + 1], out[m + 2], out[m + 3], out[m + 4] = i, hits, w.start, fw[j + 3]
        out[m + 5], out[m + 6], out[m + 7] = 0, e, 0
        m = m + 7
      end
    end
  end
  return reply_of(out, m, packed)
end
