-- limit.lua: the limit of one op or charge: algorithm (0 = invalid limit),
-- requests, period µs, burst, refill interval µs, max debt (scripts/encode.go
-- writes them).

-- limit_new returns the limit in lim, a table it fills (reusing one saves
-- an allocation per op), or in a new one.
local function limit_new(alg, req, period, burst, refill, debt, lim)
  local capacity = burst
  if capacity == 0 then capacity = req end
  if lim == nil then
    return {
      alg = alg, req = req, period = period, burst = burst, refill = refill, debt = debt,
      capacity = capacity,
    }
  end
  lim.alg, lim.req, lim.period, lim.burst, lim.refill, lim.debt = alg, req, period, burst, refill, debt
  lim.capacity = capacity
  return lim
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

-- op_of decodes op i of a take's packed ops: its limit (in lim, if given:
-- see limit_new), hits and mode. The caller checked the length of ops.
local function op_of(ops, i, lim)
  local alg, req, period, burst, refill, debt, h, mode = struct.unpack(OP_FORMAT, ops, OP_BYTES * (i - 1) + 1)
  return limit_new(alg, req, period, burst, refill, debt, lim), h, mode
end
