-- KEYS: due zset, in-flight zset. ARGV: now ms (0: Redis TIME).
-- Returns {waiting, in flight, oldest due or deadline (-1: none), now}.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local head = -1
for _, k in ipairs({KEYS[1], KEYS[2]}) do
  local h = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if h[2] and (head < 0 or tonumber(h[2]) < head) then
    head = tonumber(h[2])
  end
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), head, now}
