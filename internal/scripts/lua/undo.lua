-- undo.lua: the driver of the undo script. Takes back, atomically, what
-- take.lua charged a set of keys (all in one Cluster slot), exactly like
-- algorithms.Undo: never more room than if the charge had not happened.
--
-- KEYS: one per charge (a key the take wrote).
-- ARGV[1]: now in µs, or 0 to use the server's TIME.
-- ARGV[2..]: per charge, the limit (6 integers, limit.lua), hits, a, b, c,
--   e, n, then n pairs (seq, hits): the charge take.lua replied.
-- Reply: the number of charges that found state to undo.
--
-- An undo never sets a TTL: it only ever shortens how long a state matters.

local function undo_main()
  local now = now_of(ARGV[1])
  local j, undone = 2, 0
  for i = 1, #KEYS do
    local key, lim = KEYS[i], limit_of(j)
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
    if alg ~= nil and ch.hits > 0 and lim.req > 0 then
      if lim.alg == FIXED_WINDOW then
        -- fixed_window_undo changes only the count, and only in the
        -- charge's window: rewrite those 8 bytes in place (the key keeps
        -- its TTL), as take_fixed does, instead of the whole state.
        local a, b, _, e = regs_get(key)
        if e ~= 0 and now < e then
          if a == ch.a and b > 0 then
            regs_put_count(key, struct.pack('<d', math.max(b - ch.hits, 0)))
          end
          undone = undone + 1
        end
      elseif alg.kind == LOG then
        if sliding_log_undo(lim, key, ch, now) then undone = undone + 1 end
      else
        local st = regs_load(key)
        if st.e ~= 0 and now < st.e then
          redis.call('SET', key, regs_pack(alg.undo(lim, st, ch, now)), 'KEEPTTL')
          undone = undone + 1
        end
      end
    end
  end
  return undone
end

return undo_main()
