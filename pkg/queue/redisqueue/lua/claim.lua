-- Claims up to max due messages, oldest due first: waiting messages whose
-- due time passed and in-flight ones whose visibility deadline passed.
-- KEYS: due zset, in-flight zset, data hash
-- ARGV: now ms (0: Redis TIME), max, visibility ms, receipt nonce, ttl ms
-- Returns {now, deadline, next due (-1: none), {id, payload, due, attempt, receipt}...}.
local now = now_ms(ARGV[1])
local max = tonumber(ARGV[2])
local deadline = now + tonumber(ARGV[3])
-- Heads first (common.lua's head): an idle queue costs two ZRANGEs, no
-- range scans.
local function due(k, h)
  if h < 0 or h > now then
    return {}
  end
  return redis.call('ZRANGEBYSCORE', k, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
end
local hw, hf = head(KEYS[1]), head(KEYS[2])
local w, f = due(KEYS[1], hw), due(KEYS[2], hf)
-- Merge both by (score, id), the order of one sorted set.
local picked = {}
local i, j = 1, 1
while #picked < max and (i <= #w or j <= #f) do
  local takeW
  if i > #w then
    takeW = false
  elseif j > #f then
    takeW = true
  else
    local sw, sf = tonumber(w[i + 1]), tonumber(f[j + 1])
    takeW = sw < sf or (sw == sf and w[i] < f[j])
  end
  if takeW then
    picked[#picked + 1] = {w[i], w[i + 1], KEYS[1]}
    i = i + 2
  else
    picked[#picked + 1] = {f[j], f[j + 1], KEYS[2]}
    j = j + 2
  end
end
local out = {}
for _, p in ipairs(picked) do
  local id = p[1]
  redis.call('ZREM', p[3], id)
  local body = redis.call('HGET', KEYS[3], 'b:' .. id)
  -- A member without a body outlived its data (cannot happen while the
  -- keys share one TTL); drop it rather than hand out an empty message.
  if body then
    local attempt = redis.call('HINCRBY', KEYS[3], 'a:' .. id, 1)
    local seq = redis.call('HINCRBY', KEYS[3], '#seq', 1)
    local receipt = ARGV[4] .. '-' .. seq
    redis.call('HSET', KEYS[3], 'r:' .. id, receipt)
    redis.call('ZADD', KEYS[2], deadline, id)
    out[#out + 1] = {id, body, p[2], attempt, receipt}
  end
end
if #out > 0 then
  keep(ARGV[5])
end
if #picked > 0 then
  hw, hf = head(KEYS[1]), head(KEYS[2])
end
return {now, deadline, earliest(hw, hf), out}
