-- Adds a message unless its id is waiting or in flight.
-- KEYS: due zset, in-flight zset, data hash (all in the queue's slot)
-- ARGV: now ms (0: Redis TIME), id, payload, delay ms, deliver_at ms (-1: none),
--       ttl ms, notification channel, queue name
-- Returns {duplicate 0/1, due ms, now ms}.
local now = now_ms(ARGV[1])
local id = ARGV[2]
local s = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
if s then
  return {1, tonumber(s), now}
end
local due
local at = tonumber(ARGV[5])
if at >= 0 then
  due = math.max(at, now)
else
  due = now + tonumber(ARGV[4])
end
local head = queue_head()
redis.call('ZADD', KEYS[1], due, id)
redis.call('HSET', KEYS[3], 'b:' .. id, ARGV[3], 'a:' .. id, 0)
keep(ARGV[6])
-- Only a new head can make a sleeping consumer wake earlier.
if head < 0 or due < head then
  redis.call('PUBLISH', ARGV[7], ARGV[8] .. '|' .. due .. '|' .. now)
end
return {0, due, now}
