-- limit.lua: the limit fields of one op or charge in ARGV, from ARGV[j]:
-- algorithm (0 = invalid limit), requests, period µs, burst, refill
-- interval µs, max debt (scripts/encode.go writes them).

local function limit_of(j)
  local lim = {
    alg = tonumber(ARGV[j]),
    req = tonumber(ARGV[j + 1]),
    period = tonumber(ARGV[j + 2]),
    burst = tonumber(ARGV[j + 3]),
    refill = tonumber(ARGV[j + 4]),
    debt = tonumber(ARGV[j + 5]),
  }
  lim.capacity = lim.burst
  if lim.capacity == 0 then lim.capacity = lim.req end
  return lim
end
