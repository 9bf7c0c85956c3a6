-- math.lua: exact integer helpers shared by every algorithm.
--
-- Lua 5.1 numbers are IEEE binary64, exact for integers below 2^53. Every
-- algorithm keeps its values below that bound (see algorithms/validate.go),
-- but intermediate products such as elapsed*requests do not fit, so they go
-- through mad, which is exact whenever its inputs and result are.

local TWO53 = 9007199254740992

-- exact reports whether x is an integer Lua holds exactly (|x| <= 2^53),
-- which every stored value must be before an algorithm trusts it. x % 1 is
-- NaN for NaN and the infinities, and nonzero for a fraction: no call.
local function exact(x)
  return x ~= nil and x % 1 == 0 and x >= -TWO53 and x <= TWO53
end

-- divmod(a, d) = floor(a/d), a mod d for integers 0 <= a < 2^53, 1 <= d.
-- The correction steps make it independent of how a/d was rounded.
local function divmod(a, d)
  local q = math.floor(a / d)
  local r = a - q * d
  while r < 0 do q = q - 1; r = r + d end
  while r >= d do q = q + 1; r = r - d end
  return q, r
end

-- mad(a, b, c, d) = floor((a*b + c)/d), (a*b + c) mod d, exactly, for
-- integers a, b, c >= 0 below 2^53, 1 <= d < 2^52, and a quotient below 2^53.
local function mad(a, b, c, d)
  local p = a * b
  if p < TWO53 then
    -- p is exact: a rounded product below 2^53 means the true one is too.
    local s = p + c
    if s < TWO53 then
      return divmod(s, d)
    end
  end
  -- Slow path: (a*b + c)/d = qa*b + qc + (ra*b + rc)/d with ra, rc < d, then
  -- ra*b by shift-and-add over the bits of b, keeping the remainder below d
  -- so every sum stays below 2d < 2^53.
  local qa, ra = divmod(a, d)
  local qc, rc = divmod(c, d)
  local bits, n, x = {}, 0, b
  while x > 0 do
    local half = math.floor(x / 2)
    n = n + 1
    bits[n] = x - half * 2
    x = half
  end
  local q, r = 0, 0
  for i = n, 1, -1 do
    q = q * 2
    r = r * 2
    if r >= d then r = r - d; q = q + 1 end
    if bits[i] == 1 then
      r = r + ra
      if r >= d then r = r - d; q = q + 1 end
    end
  end
  r = r + rc
  if r >= d then r = r - d; q = q + 1 end
  return qa * b + qc + q, r
end

-- ceil_to(x, step) is the smallest multiple of step that is >= x (x >= 0).
local function ceil_to(x, step)
  if step <= 1 then return x end
  local q, r = divmod(x, step)
  if r == 0 then return x end
  return (q + 1) * step
end

-- now_of is a script's now in µs: ARGV's, or Redis's TIME when it is 0,
-- as in production (tests pass an explicit now).
local function now_of(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

-- NEVER is the retry_after of hits that can never be admitted.
local NEVER = -1

-- int formats an integer for a Redis argument: tostring would round to 14
-- significant digits and redis.call may use an exponent.
local function int(x)
  return string.format('%d', x)
end

-- ttl_ms is the PEXPIRE of a state that stops mattering at e (µs): rounded
-- up and at least 1 ms, so Redis never drops a key before its logical end.
local function ttl_ms(e, now)
  if e - now <= 1000 then return 1 end
  local q, r = divmod(e - now, 1000)
  if r > 0 then q = q + 1 end
  return q
end

-- ttl_arg is ttl_ms as a command argument. Redis 7.0 formats a number
-- passed to redis.call with "%.17g", about 0.4 µs per write (as much as
-- tostring here), where a string goes as is: TTL_ARGS keeps the strings of
-- the TTLs recently written, a few thousand values for rules' windows, and
-- starts over past TTL_ARGS_MAX. Loaded as a FUNCTION library it lives as
-- long as the library; a script run by EVAL starts empty on every call.
local TTL_ARGS, TTL_ARGS_N, TTL_ARGS_MAX = {}, 0, 4096
local function ttl_arg(e, now)
  local ms = ttl_ms(e, now)
  local s = TTL_ARGS[ms]
  if s == nil then
    if TTL_ARGS_N >= TTL_ARGS_MAX then
      TTL_ARGS, TTL_ARGS_N = {}, 0
    end
    s = int(ms)
    TTL_ARGS[ms], TTL_ARGS_N = s, TTL_ARGS_N + 1
  end
  return s
end

-- expire_at gives a written key its TTL; every write goes through it.
local function expire_at(key, e, now)
  redis.call('PEXPIRE', key, ttl_arg(e, now))
end

-- clamp bounds x to lo..hi (lo <= hi).
local function clamp(x, lo, hi)
  if x < lo then return lo end
  if x > hi then return hi end
  return x
end

-- refill_time mirrors algorithms.refillTime: µs a rate of r per p needs to
-- add x - frac/p whole units (x >= 1, 0 <= frac < p).
local function refill_time(x, frac, p, r)
  local q = mad(x - 1, p, p - frac + r - 1, r)
  return q
end

-- zero_rate mirrors algorithms.zeroRate: Requests 0 admits only checks.
-- The state, whatever its shape (a log view, or a register's a, b, c, e),
-- passes through unchanged.
local function zero_rate(h, ...)
  if h > 0 then
    return false, 0, 0, NEVER, ...
  end
  return true, 0, 0, 0, ...
end
