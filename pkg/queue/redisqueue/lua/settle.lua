-- Ack, Nack or Extend of a claimed message, only with its current receipt.
-- KEYS: due zset, in-flight zset, data hash
-- ARGV: now ms (0: Redis TIME), op ('ack', 'nack', 'extend'), id, receipt,
--       ms (nack delay or extend visibility), ttl ms, channel, queue name
-- Returns {ok 0/1, time ms (nack: due, extend: deadline), now}.
local now = now_ms(ARGV[1])
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
  local head = queue_head()
  redis.call('ZADD', KEYS[1], at, id)
  if head < 0 or at < head then
    redis.call('PUBLISH', ARGV[7], ARGV[8] .. '|' .. at .. '|' .. now)
  end
end
keep(ARGV[6])
return {1, at, now}
