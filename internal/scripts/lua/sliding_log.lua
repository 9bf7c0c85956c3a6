-- sliding_log.lua: storage and mirror of algorithms/sliding_log.go (read it
-- for the semantics).
--
-- Layout: a ZSET with one member "at:seq:hits" scored at (µs) per admitted
-- request, plus one meta member "~<sum of hits>" scored ExpiresAt, which is
-- always the highest score while the log is live. The running sum makes a
-- decision O(log n) plus the entries it prunes, instead of reading the log.
--
-- In a batch the log is a view: the stored ZSET (ignored when fresh), the
-- entries above cut that still count (ssum), and the entries this batch adds
-- at now (pend). Nothing is written until phase 2.

local function log_fresh(key)
  return { key = key, fresh = true, cut = nil, ssum = 0, pend = {}, psum = 0, exp = 0, meta = nil }
end

local function log_parse_hits(member)
  return tonumber(string.match(member, '^%-?%d+:%d+:(%d+)$'))
end

local function log_load(key, now)
  local v = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
  if type(v) ~= 'table' or v.err then
    return log_fresh(key), false
  end
  if #v == 0 then
    return log_fresh(key), true
  end
  local sum = tonumber(string.match(v[1], '^~(%d+)$'))
  local exp = tonumber(v[2])
  if sum == nil or exp == nil then
    return log_fresh(key), false
  end
  return { key = key, fresh = false, cut = nil, ssum = sum, pend = {}, psum = 0, exp = exp, meta = v[1] }, true
end

local function log_copy(view)
  local pend = {}
  for i, e in ipairs(view.pend) do pend[i] = e end
  return {
    key = view.key, fresh = view.fresh, cut = view.cut, ssum = view.ssum,
    pend = pend, psum = view.psum, exp = view.exp, meta = view.meta,
  }
end

local function log_expire(view, now)
  if view.exp ~= 0 and now >= view.exp then
    return log_fresh(view.key)
  end
  return view
end

-- log_sum_above is the sum of the stored entries scored above cut.
local function log_sum_above(view, cut)
  if view.fresh then return 0 end
  if view.cut ~= nil and cut <= view.cut then return view.ssum end
  local lo = '-inf'
  if view.cut ~= nil then lo = '(' .. int(view.cut) end
  local sum = view.ssum
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', view.key, lo, int(cut))) do
    sum = sum - (log_parse_hits(m) or 0)
  end
  return sum
end

-- log_newest_above is the newest stored entry's score above cut, or nil.
local function log_newest_above(view, cut)
  if view.fresh then return nil end
  local v = redis.call('ZREVRANGEBYSCORE', view.key, '+inf', '(' .. int(cut), 'WITHSCORES', 'LIMIT', 0, 2)
  for i = 1, #v, 2 do
    if string.sub(v[i], 1, 1) ~= '~' then return tonumber(v[i + 1]) end
  end
  return nil
end

-- log_room_at mirrors algorithms.logRoomAt over the view: the score of the
-- oldest entry whose leaving, with all before it, frees at least excess hits.
-- The entries this batch added sit at now, after the stored ones at or
-- before now.
local function log_room_at(view, cut, excess, now)
  local freed = 0
  local pending = view.psum > 0
  if not view.fresh then
    local off = 0
    while true do
      local v = redis.call('ZRANGEBYSCORE', view.key, '(' .. int(cut), '+inf', 'WITHSCORES', 'LIMIT', off, 64)
      for i = 1, #v, 2 do
        local m = v[i]
        if string.sub(m, 1, 1) ~= '~' then
          local at = tonumber(v[i + 1])
          if pending and at > now then
            pending = false
            freed = freed + view.psum
            if freed >= excess then return now end
          end
          freed = freed + (log_parse_hits(m) or 0)
          if freed >= excess then return at end
        end
      end
      if #v < 128 then break end
      off = off + 64
    end
  end
  return now
end

local function sliding_log(lim, view, h, now)
  if lim.req == 0 then
    return zero_rate(h, view)
  end
  local p, r = lim.period, lim.req
  local cut = now - p
  if view.cut ~= nil and view.cut > cut then cut = view.cut end
  local ssum = log_sum_above(view, cut)
  local room = r - ssum - view.psum
  local newest = log_newest_above(view, cut)
  if not view.fresh and newest ~= nil and newest > now + p then
    -- Out of range (algorithms.slidingLogValid), checked here where the
    -- newest entry is at hand: read the key as absent.
    return sliding_log(lim, log_fresh(view.key), h, now)
  end
  if view.psum > 0 and (newest == nil or newest < now) then newest = now end
  local reset = 0
  if newest ~= nil then reset = newest + p - now end
  if h > r then
    return false, math.max(room, 0), reset, NEVER, view
  end
  if room < 0 or h > room then
    local at = log_room_at(view, cut, h - room, now)
    return false, math.max(room, 0), reset, at + p - now, view
  end
  local nv = log_copy(view)
  nv.cut, nv.ssum = cut, ssum
  if h > 0 then
    -- Number after the highest Seq at now (an undo may have removed one
    -- below it), like algorithms.slidingLog.
    local seq = 1
    if #nv.pend > 0 then
      seq = nv.pend[#nv.pend].seq + 1
    elseif not nv.fresh then
      for _, m in ipairs(redis.call('ZRANGEBYSCORE', nv.key, int(now), int(now))) do
        local s = tonumber(string.match(m, '^%-?%d+:(%d+):%d+$'))
        if s ~= nil and s >= seq then seq = s + 1 end
      end
    end
    nv.pend[#nv.pend + 1] = { seq = seq, hits = h }
    nv.psum = nv.psum + h
    if newest == nil or newest < now then newest = now end
  end
  if newest == nil then
    return true, room - h, 0, 0, log_fresh(view.key)
  end
  nv.exp = newest + p
  return true, room - h, nv.exp - now, 0, nv
end

-- sliding_log_force mirrors algorithms.slidingLogForce: log h past the
-- limit as one entry at now (the log's sum stays within MAX_COUNT), as
-- sliding_log admits it under a limit of MAX_COUNT; then what it logged.
local function sliding_log_force(lim, view, h, now)
  local cut = now - lim.period
  if view.cut ~= nil and view.cut > cut then cut = view.cut end
  h = math.min(h, MAX_COUNT - log_sum_above(view, cut) - view.psum)
  if h <= 0 then return view, 0 end
  local big = { alg = lim.alg, req = MAX_COUNT, period = lim.period }
  local _, _, _, _, nv = sliding_log(big, view, h, now)
  return nv, h
end

local function log_write(key, view, typeok, now)
  -- No longer mattering (algorithms.TakeAll's settle): deleted.
  if view.exp <= now then
    redis.call('DEL', key)
    return
  end
  if view.fresh or not typeok then
    redis.call('DEL', key)
  else
    if view.cut ~= nil then redis.call('ZREMRANGEBYSCORE', key, '-inf', int(view.cut)) end
    if view.meta ~= nil then redis.call('ZREM', key, view.meta) end
  end
  local sum = view.ssum + view.psum
  if sum == 0 then
    redis.call('DEL', key)
    return
  end
  local args = {}
  for _, e in ipairs(view.pend) do
    args[#args + 1] = int(now)
    args[#args + 1] = int(now) .. ':' .. int(e.seq) .. ':' .. int(e.hits)
  end
  args[#args + 1] = int(view.exp)
  args[#args + 1] = '~' .. int(sum)
  redis.call('ZADD', key, unpack(args))
  expire_at(key, view.exp, now)
end

-- undo only {
-- sliding_log_undo mirrors algorithms.slidingLogUndo on the stored ZSET:
-- remove the members the charge added (those a later take pruned are gone
-- already), lower the meta sum by their hits, and move ExpiresAt to the
-- newest remaining entry's end. The key keeps its TTL. It reports whether
-- it removed anything.
local function sliding_log_undo(lim, key, ch, now)
  local t = redis.call('TYPE', key)
  if t.ok ~= 'zset' then return false end
  local view = log_load(key, now)
  if view.fresh or now >= view.exp then return false end
  local removed = 0
  for _, e in ipairs(ch.entries) do
    local m = int(ch.a) .. ':' .. int(e.seq) .. ':' .. int(e.hits)
    if redis.call('ZREM', key, m) == 1 then removed = removed + e.hits end
  end
  if removed == 0 then return false end
  local sum = view.ssum - removed
  local newest = log_newest_above(view, -1)
  if sum <= 0 or newest == nil then
    redis.call('DEL', key)
    return true
  end
  redis.call('ZREM', key, view.meta)
  redis.call('ZADD', key, int(newest + lim.period), '~' .. int(sum))
  return true
end
-- } undo only

-- sliding_log_valid mirrors algorithms.slidingLogValid on the view: the sum
-- of its stored (meta member) and pending entries, its ExpiresAt and its
-- newest stored entry.
local function sliding_log_valid(lim, view, now)
  local sum = view.psum
  if not view.fresh then sum = sum + view.ssum end
  if view.fresh and sum == 0 then return true end
  -- The newest entry's bound is checked in sliding_log, which reads it anyway.
  return sum >= 1 and sum <= MAX_COUNT and exact(view.exp) and view.exp <= now + 2 * lim.period
end

-- sliding_log_refund mirrors algorithms.slidingLogRefund on the stored
-- ZSET: the entries still in the period lose h hits, newest first (by
-- score, then seq); the entries that left the period go, as a charge
-- prunes them; the meta sum and ExpiresAt follow, and an emptied log is
-- deleted. A key that is not a live, valid log of some requests is left
-- alone. It returns the hits it gave back (0: it changed nothing).
local function sliding_log_refund(lim, key, h, now)
  if lim.req == 0 then return 0 end
  local view, typeok = log_load(key, now)
  if not typeok or view.fresh or now >= view.exp or not sliding_log_valid(lim, view, now) then
    return 0
  end
  local p, cut = lim.period, now - lim.period
  local v = redis.call('ZRANGEBYSCORE', key, '(' .. int(cut), '+inf')
  local entries = {}
  for _, m in ipairs(v) do
    local at, seq, hits = string.match(m, '^(%-?%d+):(%d+):(%d+)$')
    if at ~= nil then
      entries[#entries + 1] = { at = tonumber(at), seq = tonumber(seq), hits = tonumber(hits), m = m }
    end
  end
  table.sort(entries, function(x, y) return x.at < y.at or (x.at == y.at and x.seq < y.seq) end)
  if #entries == 0 or entries[#entries].at > now + p then
    -- Nothing in the period; or out of range (algorithms.slidingLogValid):
    -- read as absent.
    return 0
  end
  local left, n = h, #entries
  while left > 0 and n >= 1 do
    local en = entries[n]
    redis.call('ZREM', key, en.m)
    if en.hits > left then
      en.hits = en.hits - left
      redis.call('ZADD', key, int(en.at), int(en.at) .. ':' .. int(en.seq) .. ':' .. int(en.hits))
      left = 0
    else
      left, n = left - en.hits, n - 1
    end
  end
  local sum = 0
  for i = 1, n do sum = sum + entries[i].hits end
  if sum == 0 then
    redis.call('DEL', key)
    return h - left
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cut))
  redis.call('ZREM', key, view.meta)
  local exp = entries[n].at + p
  redis.call('ZADD', key, int(exp), '~' .. int(sum))
  expire_at(key, exp, now)
  return h - left
end
