-- limit.lua: the limit of one op or charge: algorithm (0 = invalid limit),
-- requests, period µs, burst, refill interval µs, max debt (scripts/encode.go
-- writes them).

-- limit_new is the limit table of a log's take and refund, and of the
-- undo script for every algorithm.
local function limit_new(alg, req, period, burst, refill, debt)
  local capacity = burst
  if capacity == 0 then capacity = req end
  return {
    alg = alg, req = req, period = period, burst = burst, refill = refill, debt = debt,
    capacity = capacity,
  }
end

-- limit_of reads the six fields as decimal ARGV from ARGV[j] (undo.lua).
local function limit_of(j)
  return limit_new(tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]),
    tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5]))
end

-- OP_FORMAT is one op of a take: the six limit fields, hits and mode as
-- eight little-endian binary64 (every value is an integer below 2^53). A
-- take's ops are one ARGV entry, OP_BYTES per op, each decoded by one C
-- call instead of eight tonumber.
local OP_FORMAT, OP_BYTES = '<dddddddd', 64

-- mode_of splits an op's packed mode into its algorithms.Mode and its
-- usage and joined flags.
local function mode_of(mode)
  local joined = mode >= JOINED
  if joined then mode = mode - JOINED end
  local usage = mode >= USAGE
  if usage then mode = mode - USAGE end
  return mode, usage, joined
end

-- stored_regs is key's register or counter state as algorithms.Take reads
-- it under a limit of r requests per p µs (capacity cap, refill interval
-- or a counter's months refill, max debt): an expired state, or one out of
-- the algorithm's range, as the fresh state 0, 0, 0, 0 (a fresh state is
-- always in range). kept is a counter's stored value, whose TTL a write
-- keeps (counter_get's).
local function stored_regs(alg, r, p, cap, refill, debt, key, now)
  local a, b, c, e, kept
  if alg.kind == REGS then
    a, b, c, e = regs_get(key)
  else
    a, b, c, e, kept = counter_get(key, p, refill, now)
  end
  if (e ~= 0 and now >= e) or (r > 0 and not alg.valid(r, p, cap, refill, debt, a, b, c, now)) then
    return 0, 0, 0, 0, kept
  end
  return a, b, c, e, kept
end
