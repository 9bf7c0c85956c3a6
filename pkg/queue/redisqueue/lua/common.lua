-- common.lua: what every queue script starts with (redisqueue.go puts it
-- in front of each). KEYS[1], KEYS[2]: the due and in-flight sets.

-- now_ms is ARGV's now in ms, or Redis's TIME when it is 0 (production).
local function now_ms(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- head is the lowest score in set k, -1 when it is empty.
local function head(k)
  local h = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
  if h[2] then
    return tonumber(h[2])
  end
  return -1
end

-- earliest of two heads (-1: both sets empty): when the queue next needs a
-- consumer, a message falling due or a claim running out.
local function earliest(a, b)
  if b >= 0 and (a < 0 or b < a) then
    return b
  end
  return a
end

-- queue_head is the queue's earliest score over both sets.
local function queue_head()
  return earliest(head(KEYS[1]), head(KEYS[2]))
end

-- keep gives the queue's three keys the TTL ttl (ms) after a write.
local function keep(ttl)
  for k = 1, 3 do
    redis.call('PEXPIRE', KEYS[k], ttl)
  end
end
