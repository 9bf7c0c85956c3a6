-- take_many.lua: several independent takes in one call: what a pipeline of
-- takes would do, for one entry into Redis and one TIME instead of one per
-- take (scripts.MergeTakes builds it, the coalescer sends it).
-- KEYS: every take's KEYS, in order. ARGV[1]: now in µs, or 0 for TIME;
-- then per take its ops (its ARGV[2]), which say how many KEYS are its,
-- followed by CHARGED ('1', its ARGV[3]) when it asks for its charges
-- (scripts.WithCharges) or DENIALS ('2') when it asks for its denials too
-- (scripts.WithDenials: a Cluster slot group of a request spanning slots).
-- Ops are a non-empty multiple of OP_BYTES, so a marker cannot be read as
-- ops, and a take without one costs the call nothing more.
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

-- Per take of the call (take_many's check sets them): its ops, its number
-- of ops, whether it asks for its charges and for its denials. BATCH holds
-- take_batch's reply values; BATCH_AT, the takes it finished.
local TAKE_OPS, TAKE_N, TAKE_CHARGES, TAKE_DENIALS, BATCH, BATCH_AT = {}, {}, {}, {}, {}, 0

-- BATCH_KEYS bounds one MGET's keys (unpack's stack); PACK_CHUNK the values
-- of one struct.pack (its formats are cached by length).
local BATCH_KEYS, PACK_CHUNK = 4000, 240

-- pack_values is out[1 .. m] as one string of little-endian binary64.
local function pack_values(out, a, m)
  local s = ''
  while a <= m do
    local b = math.min(a + PACK_CHUNK - 1, m)
    local f = PACK_FORMATS[b - a + 1]
    if f == nil then
      f = '<' .. string.rep('d', b - a + 1)
      PACK_FORMATS[b - a + 1] = f
    end
    s = s .. struct.pack(f, unpack(out, a, b))
    a = b + 1
  end
  return s
end

-- batch_take decides take_fixed's take of n plain ops (t) on keys[k0 + 1
-- ..], as take_fixed would on what the batch's MGET read (vals), but a key
-- an earlier take wrote (written: the value it left); its values go to out
-- from m + 2, their number at m + 1. It returns the new m and written.
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
        written = written or {}
        written[keys[k0 + i]] = value_of(fw[j + 6], fw[j + 3])
      end
    end
  end
  out[o0] = e - o0
  return e, written
end

-- take_batch decides every take of the call in one pass when all are
-- take_fixed's plain takes (no Spare op, no key twice in a take, no
-- denials asked): one MGET for every key, each take all-or-nothing on its
-- own in arrival order, one reply string. It returns nil, having read
-- nothing, for any other call. BATCH_AT counts the takes it finished, so a
-- failure is its next take's alone.
local function take_batch(now, keys, takes)
  BATCH_AT = 0
  if #keys > BATCH_KEYS then return nil end
  local k0 = 0
  for x = 1, takes do
    local n = TAKE_N[x]
    local t = TAKE_DENIALS[x] == false and ops_of(TAKE_OPS[x], n)
    if not t or t.spare or (n > 1 and not distinct(keys, k0, n)) then return nil end
    TAKE_OPS[x], k0 = t, k0 + n
  end
  local vals = redis.call('MGET', unpack(keys))
  local out, m, written = BATCH, 0, nil
  k0 = 0
  for x = 1, takes do
    local n = TAKE_N[x]
    m, written = batch_take(TAKE_OPS[x], n, keys, k0, vals, written, now, out, m, TAKE_CHARGES[x])
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
-- call, not its neighbours' keys. It returns the number of takes.
local function check_takes(keys, args)
  local total, b, takes = 0, 2, 0
  while b <= #args do
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
  return takes
end

local function take_many()
  local keys, args = KEYS, ARGV
  local now = now_of(args[1])
  local takes = check_takes(keys, args)
  local ok, reply = pcall(take_batch, now, keys, takes)
  if ok and reply then return reply end
  local out, first = {}, 1
  if not ok then
    out = batch_failed(reply)
    first = BATCH_AT + 2
  end
  -- Take by take, from the first take_batch left (its ops strings are in
  -- args, TAKE_OPS may hold their decoding).
  local k0, b = 0, 2
  for x = 1, takes do
    local ops, n = args[b], TAKE_N[x]
    b = b + 1
    if args[b] == CHARGED or args[b] == DENIALS then b = b + 1 end
    if x >= first then
      local okx, r = pcall(take_keys, now, keys, k0, ops, n, TAKE_CHARGES[x], TAKE_DENIALS[x], true)
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
