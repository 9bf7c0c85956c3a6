-- Ack, Nack or Extend of a claimed message, only with its current receipt.
-- KEYS: due zset, in-flight zset, data hash
-- ARGV: now ms (0: Redis TIME), op ('ack', 'nack', 'extend'), id, receipt,
--       ms (nack delay or extend visibility), ttl ms, channel, queue name
-- Returns {ok 0/1, time ms (nack: due, extend: deadline), now}.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local op, id = ARGV[2], ARGV[3]
if redis.call('HGET', KEYS[3], 'r:' .. id) ~= ARGV[4] then
  return {0, 0, now}
end
if op == 'ack' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], 'b:' .. id, 'a:' .. id, 'r:' .. id)
  return {1, now, now}
end
local at = now + tonumber(ARGV[5])
if op == 'extend' then
  redis.call('ZADD', KEYS[2], at, id)
else
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], 'r:' .. id)
  local head = -1
  for _, k in ipairs({KEYS[1], KEYS[2]}) do
    local h = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    if h[2] and (head < 0 or tonumber(h[2]) < head) then
      head = tonumber(h[2])
    end
  end
  redis.call('ZADD', KEYS[1], at, id)
  if head < 0 or at < head then
    redis.call('PUBLISH', ARGV[7], ARGV[8] .. '|' .. at .. '|' .. now)
  end
end
for k = 1, 3 do
  redis.call('PEXPIRE', KEYS[k], ARGV[6])
end
return {1, at, now}
