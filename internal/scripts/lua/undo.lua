-- undo.lua: the driver of the undo script. Takes back, atomically, what
-- take.lua charged a set of keys (all in one Cluster slot), exactly like
-- algorithms.Undo: never more room than if the charge had not happened.
--
-- KEYS: one per charge (a key the take wrote).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2..]: per charge, the limit (6 integers, limit.lua), applied, a, b,
--   c, e, n, then n pairs (seq, hits): the charge take.lua replied; or, for
--   a charge of the Counter family (a valid limit of epoch windows, applied
--   > 0), UNDO_COUNTER, applied, a and e (scripts.EncodeUndo).
-- Reply: the number of charges that found state to undo.
--
-- An undo never sets a TTL: it only ever shortens how long a state matters.
-- How it takes a charge back is its family's (ALGS' kind): a register
-- state is read, given to the algorithm's undo and written back; a log's
-- and a counter's undo works on the key itself.

-- undo_regs undoes a register charge with alg's undo; it reports whether
-- it found the state live.
local function undo_regs(alg, lim, key, ch, now)
  local st = regs_load(key)
  if st.e == 0 or now >= st.e then
    return false
  end
  redis.call('SET', key, regs_pack(alg.undo(lim, st, ch, now)), 'KEEPTTL')
  return true
end

-- undo_long undoes key's charge in the long form at ARGV[j]; it returns
-- the next charge's j, and whether it found the state live.
local function undo_long(key, j, now)
  local lim = limit_of(j)
  local ch = {
    applied = tonumber(ARGV[j + 6]), a = tonumber(ARGV[j + 7]), b = tonumber(ARGV[j + 8]),
    c = tonumber(ARGV[j + 9]), e = tonumber(ARGV[j + 10]), entries = {},
  }
  local n = tonumber(ARGV[j + 11])
  for k = 1, n do
    ch.entries[k] = { seq = tonumber(ARGV[j + 10 + 2 * k]), hits = tonumber(ARGV[j + 11 + 2 * k]) }
  end
  j = j + 12 + 2 * n
  local alg = ALGS[lim.alg]
  -- A zero rate keeps no state but where ALGS' zero says it counts
  -- (fixed_window, algorithms.Undo).
  if alg == nil or ch.applied <= 0 or (lim.req <= 0 and not alg.zero) then
    return j, false
  end
  if alg.kind == REGS then
    return j, undo_regs(alg, lim, key, ch, now)
  end
  return j, alg.undo(lim, key, ch, now)
end

local function undo_main()
  local now = now_of(ARGV[1])
  local j, undone = 2, 0
  for i = 1, #KEYS do
    local key, found = KEYS[i], false
    if ARGV[j] == UNDO_COUNTER then
      found = counter_undo(key, tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), now, 0)
      j = j + 4
    else
      j, found = undo_long(key, j, now)
    end
    if found then undone = undone + 1 end
  end
  return undone
end

return undo_main()
