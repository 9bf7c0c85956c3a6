-- undo.lua: the driver of the undo script. Takes back, atomically, what
-- take.lua charged a set of keys (all in one Cluster slot), exactly like
-- algorithms.Undo: never more room than if the charge had not happened.
--
-- KEYS: one per charge (a key the take wrote).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2..]: per charge, the limit (6 integers, limit.lua), hits, a, b, c,
--   e, n, then n pairs (seq, hits): the charge take.lua replied; or, for a
--   fixed_window charge (a valid limit, hits > 0), UNDO_FIXED, hits and a
--   (scripts.EncodeUndo).
-- Reply: the number of charges that found state to undo.
--
-- An undo never sets a TTL: it only ever shortens how long a state matters.

-- undo_fixed takes hits back from a fixed_window key charged in the window
-- starting at a, and returns 1 if it found the state live. fixed_window's
-- undo changes only the count, and only in the charge's window: it
-- rewrites those 8 bytes in place (the key keeps its TTL), as take_fixed
-- does, instead of the whole state.
local function undo_fixed(key, hits, a, now)
  local sa, b, _, e = regs_get(key)
  if e == 0 or now >= e then
    return 0
  end
  if sa == a and b > 0 then
    regs_put_count(key, struct.pack('<d', math.max(b - hits, 0)))
  end
  return 1
end

-- undo_long undoes key's charge in the long form at ARGV[j]; it returns
-- the next charge's j, and 1 if it found the state live.
local function undo_long(key, j, now)
  local lim = limit_of(j)
  local ch = {
    hits = tonumber(ARGV[j + 6]), a = tonumber(ARGV[j + 7]), b = tonumber(ARGV[j + 8]),
    c = tonumber(ARGV[j + 9]), e = tonumber(ARGV[j + 10]), entries = {},
  }
  local n = tonumber(ARGV[j + 11])
  for k = 1, n do
    ch.entries[k] = { seq = tonumber(ARGV[j + 10 + 2 * k]), hits = tonumber(ARGV[j + 11 + 2 * k]) }
  end
  j = j + 12 + 2 * n
  local alg = ALGS[lim.alg]
  if alg == nil or ch.hits <= 0 or lim.req <= 0 then
    return j, 0
  end
  if alg.kind == LOG then
    if sliding_log_undo(lim, key, ch, now) then return j, 1 end
    return j, 0
  end
  local st = regs_load(key)
  if st.e == 0 or now >= st.e then
    return j, 0
  end
  redis.call('SET', key, regs_pack(alg.undo(lim, st, ch, now)), 'KEEPTTL')
  return j, 1
end

local function undo_main()
  local now = now_of(ARGV[1])
  local j, undone = 2, 0
  for i = 1, #KEYS do
    local key, n = KEYS[i], 0
    if ARGV[j] == UNDO_FIXED then
      n = undo_fixed(key, tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), now)
      j = j + 3
    else
      j, n = undo_long(key, j, now)
    end
    undone = undone + n
  end
  return undone
end

return undo_main()
