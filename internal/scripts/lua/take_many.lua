-- take_many.lua: several independent takes in one call: what a pipeline of
-- takes would do, for one entry into Redis and one TIME instead of one per
-- take (scripts.MergeTakes builds it, the coalescer sends it).
-- KEYS: every take's KEYS, in order. ARGV[1]: now in µs, or 0 for TIME;
-- then per take its ops (its ARGV[2]), which say how many KEYS are its,
-- followed by CHARGED ('1', its ARGV[3]) when it asks for its charges
-- (scripts.WithCharges) or DENIALS ('2') when it asks for its denials too
-- (scripts.WithDenials: a Cluster slot group of a request spanning slots).
-- Ops are a non-empty multiple of OP_BYTES, so a marker cannot be read as
-- ops, and a take without one costs the call nothing more. Last, DISTINCT
-- ('d') when no key repeats among KEYS (scripts.MergeTakes checks): then
-- no take can read what another wrote, and take_batch keeps no record of
-- its writes (written is false).
--
-- Reply, either of (scripts.SplitTakes reads both):
-- - take_batch's, when every take is take_fixed's without a top-up or a
--   repeated key of its own and none asks for denials: one string of
--   little-endian binary64, per take the number of its values, then its
--   values (what take_main would reply to it alone);
-- - else an array: per take its own section, as that array or, from
--   take_fixed, packed into one string (reply_of), or an error reply if it
--   failed (every check and decision of a take runs before its first
--   write).
local CHARGED, DENIALS = '1', '2'

-- Per take of the call (check_takes sets them): its ops string, its number
-- of ops, whether it asks for its charges and for its denials; TAKE_T, its
-- ops decoded (take_batch's). BATCH holds take_batch's reply values;
-- BATCH_AT, the takes it finished.
local TAKE_OPS, TAKE_N, TAKE_CHARGES, TAKE_DENIALS, TAKE_T, BATCH, BATCH_AT = {}, {}, {}, {}, {}, {}, 0

-- BATCH_KEYS bounds one MGET's keys (unpack's stack); PACK_CHUNK the values
-- of one struct.pack (its formats are cached by length).
local BATCH_KEYS, PACK_CHUNK = 4000, 240

-- pack_values is out[a .. m] as one string of little-endian binary64.
local function pack_values(out, a, m)
  local s = nil
  while a <= m or s == nil do
    local b = math.min(a + PACK_CHUNK - 1, m)
    local f = PACK_FORMATS[b - a + 1]
    if f == nil then
      f = '<' .. string.rep('d', b - a + 1)
      PACK_FORMATS[b - a + 1] = f
    end
    local part = struct.pack(f, unpack(out, a, b))
    if s then s = s .. part else s = part end
    a = b + 1
  end
  return s
end

-- batch_take decides take_fixed's take of n plain ops (t) on keys[k0 + 1
-- ..], as take_fixed would on what the batch's MGET read (vals), but a key
-- an earlier take wrote (written: the value it left, or false when the
-- call's keys are distinct); its values go to out from m + 2, their number
-- at m + 1. It returns the new m and written.
local function batch_take(t, n, keys, k0, vals, written, now, out, m, charges)
  local o0, admitted = m + 1, true
  for i = 1, n do
    local v = vals[k0 + i]
    if written then
      local w = written[keys[k0 + i]]
      if w ~= nil then v = w end
    end
    if fixed_decide(t, i, keys, k0, v, now, out, nil, o0) then admitted = false end
  end
  local e, fw = o0 + 5 * n, FW
  if not admitted then
    -- As take_fixed: nothing written; an allowed op reports a check.
    for i = 1, n do
      local o = o0 + 5 * (i - 1)
      if out[o + 1] == 1 then out[o + 2], out[o + 5] = fw[FW_STRIDE * (i - 1) + 4], 0 end
    end
  else
    for i = 1, n do
      local j = FW_STRIDE * (i - 1)
      if fw[j + 1] then
        e = fixed_write(t, i, keys, k0, now, out, e, charges)
        if written ~= false then
          written = written or {}
          written[keys[k0 + i]] = value_of(fw[j + 6], fw[j + 3])
        end
      end
    end
  end
  out[o0] = e - o0
  return e, written
end

-- plain_write writes count in window w to key (kept: its stored value when
-- that is w's, counter_of's): counter_put, with its caches' lookups inlined
-- (a Lua call costs more than a lookup). It records the value it leaves in
-- written for the takes after (unless written is false: distinct keys) and
-- returns written.
local function plain_write(key, w, count, kept, now, written)
  local v = w.vals[count] or value_of(w, count)
  if kept then
    local moved = count - (kept - w.tag) / COUNT_TAGS
    local d = INCRS[moved] or incr_of(moved)
    redis.call('INCRBY', key, d)
  else
    local we = w.e
    if we ~= TTL_E or now ~= TTL_NOW then
      TTL, TTL_E, TTL_NOW = ttl_arg(we, now), we, now
    end
    -- As counter.lua writes it: the test build's TTL recorder rewrites both.
    local ttl = TTL
    redis.call('SET', key, v, 'PX', ttl)
  end
  if written == false then return false end
  written = written or {}
  written[key] = v
  return written
end

-- batch_plain is batch_take for a take that asks for no charges: the same
-- decisions, writes and reply, with fixed_decide and fixed_write inlined
-- for their plain ops (no top-up, no repeated key, no charge), which is
-- most of the Lua a merged call runs, and stored_count where its cache
-- answers. A take of one op (a request of one descriptor, the commonest)
-- is its own verdict: written at once. Of more, FW (take_fixed's scratch,
-- 3 slots per op here) holds per op the count it read, the value a write
-- INCRBYs (or false) and its window until the take is decided.
local function batch_plain(t, n, keys, k0, vals, written, now, out, m)
  local o0, admitted, fw = m + 1, true, FW
  for i = 1, n do
    local q, j, o, k = 4 * (i - 1), 3 * (i - 1), o0 + 5 * (i - 1), k0 + i
    local r, p, h, v = t[q + 1], t[q + 2], t[q + 3], vals[k]
    if written then
      local wv = written[keys[k]]
      if wv ~= nil then v = wv end
    end
    local w = WIN
    if p ~= WIN_P or now ~= WIN_NOW then w = window_of(now, p) end
    local count, kept = 0, false
    if v then
      local b = w.count[v]
      if b == nil then
        count, kept = stored_count(v, w, r)
      else
        kept = b * COUNT_TAGS + w.tag
        if b > 0 and (r == 0 or b <= MAX_COUNT) then count = b end
      end
    end
    local reset, room = w.e - now, r - count
    if room < 0 or h > room then
      local retry = reset
      if h > r then retry = NEVER end
      if room < 0 then room = 0 end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, room, reset, retry, 0
      admitted = false
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, room - h, reset, 0, h
    end
    if n == 1 then
      out[o0] = 5
      if admitted and h > 0 then
        written = plain_write(keys[k], w, count + h, kept, now, written)
      end
      return o0 + 5, written
    end
    fw[j + 1], fw[j + 2], fw[j + 3] = count, kept, w
  end
  local e = o0 + 5 * n
  out[o0] = e - o0
  if not admitted then
    -- Nothing written; an allowed op reports a check on its stored state.
    for i = 1, n do
      local o = o0 + 5 * (i - 1)
      if out[o + 1] == 1 then out[o + 2], out[o + 5] = out[o + 2] + out[o + 5], 0 end
    end
    return e, written
  end
  for i = 1, n do
    local h = t[4 * i - 1]
    if h > 0 then
      local j, key = 3 * (i - 1), keys[k0 + i]
      written = plain_write(key, fw[j + 3], fw[j + 1] + h, fw[j + 2], now, written)
    end
  end
  return e, written
end

-- take_batch decides every take of the call in one pass when all are
-- take_fixed's plain takes (no Spare op, no key twice in a take, no
-- denials asked): one MGET for every key, each take all-or-nothing on its
-- own in arrival order, one reply string. It returns nil, having read
-- nothing, for any other call. BATCH_AT counts the takes it finished, so a
-- failure is its next take's alone. unique: the call's keys are distinct.
local function take_batch(now, keys, takes, unique)
  BATCH_AT = 0
  if #keys > BATCH_KEYS then return nil end
  -- Nearly every take of a call repeats the ops of the one before it.
  local k0, last, t = 0, nil, nil
  for x = 1, takes do
    local n, ops = TAKE_N[x], TAKE_OPS[x]
    if TAKE_DENIALS[x] then return nil end
    if ops ~= last then
      t, last = ops_of(ops, n), ops
      if not t or t.spare then return nil end
    end
    if n > 1 and not unique and not distinct(keys, k0, n) then return nil end
    TAKE_T[x], k0 = t, k0 + n
  end
  local vals = redis.call('MGET', unpack(keys))
  local out, m, written = BATCH, 0, nil
  if unique then written = false end
  k0 = 0
  for x = 1, takes do
    local n = TAKE_N[x]
    if TAKE_CHARGES[x] then
      m, written = batch_take(TAKE_T[x], n, keys, k0, vals, written, now, out, m, true)
    else
      m, written = batch_plain(TAKE_T[x], n, keys, k0, vals, written, now, out, m)
    end
    k0, BATCH_AT = k0 + n, x
  end
  return pack_values(out, 1, m)
end

-- batch_failed is the array reply of the takes take_batch finished before
-- its take failed with err: theirs, packed, and err for that take.
local function batch_failed(err)
  local out, a = {}, 1
  for x = 1, BATCH_AT do
    local m = BATCH[a]
    out[x] = pack_values(BATCH, a + 1, a + m)
    a = a + m + 1
  end
  out[BATCH_AT + 1] = { err = tostring(err) }
  return out
end

-- check_takes reads which KEYS and markers are whose into TAKE_*, every
-- take's ops checked before any take runs, so a malformed one fails the
-- call, not its neighbours' keys. It returns the number of takes and
-- whether the call ended with DISTINCT.
local function check_takes(keys, args)
  local total, b, takes, last = 0, 2, 0, #args
  local unique = args[last] == 'd' -- DISTINCT
  if unique then last = last - 1 end
  while b <= last do
    local ops = args[b]
    local bytes = #ops
    if bytes == 0 or bytes % OP_BYTES ~= 0 then
      error('ratelimitd: take ' .. (takes + 1) .. ' has ' .. bytes .. ' bytes of ops, not a multiple of ' .. OP_BYTES)
    end
    takes, b = takes + 1, b + 1
    local more = args[b]
    TAKE_OPS[takes], TAKE_N[takes] = ops, bytes / OP_BYTES
    TAKE_DENIALS[takes], TAKE_CHARGES[takes] = more == DENIALS, more == DENIALS or more == CHARGED
    total = total + bytes / OP_BYTES
    if more == CHARGED or more == DENIALS then b = b + 1 end
  end
  if total ~= #keys then
    error('ratelimitd: ops for ' .. total .. ' keys, ' .. #keys .. ' KEYS')
  end
  return takes, unique
end

local function take_many()
  local keys, args = KEYS, ARGV
  local now = now_of(args[1])
  local takes, unique = check_takes(keys, args)
  local ok, reply = pcall(take_batch, now, keys, takes, unique)
  if ok and reply then return reply end
  local out, first = {}, 1
  if not ok then
    out = batch_failed(reply)
    first = BATCH_AT + 2
  end
  -- Take by take, from the first take_batch left.
  local k0 = 0
  for x = 1, takes do
    local n = TAKE_N[x]
    if x >= first then
      local okx, r = pcall(take_keys, now, keys, k0, TAKE_OPS[x], n, TAKE_CHARGES[x], TAKE_DENIALS[x])
      if okx then
        out[x] = r
      else
        out[x] = { err = tostring(r) }
      end
    end
    k0 = k0 + n
  end
  return out
end
