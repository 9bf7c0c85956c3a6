-- KEYS: due zset, in-flight zset. ARGV: now ms (0: Redis TIME).
-- Returns {waiting, in flight, oldest due or deadline (-1: none), now}.
local now = now_ms(ARGV[1])
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), queue_head(), now}
