#!lua name=callcost
-- What BenchmarkCallCost weighs a merged call of one-op fixed_window takes
-- against: each function adds one part of the work take_many must do, so
-- the differences between them are what that part costs Redis. The KEYS and
-- ARGV are the merged call's own (ARGV[1] now, then one op string per take).

redis.register_function('callcost_empty', function() return 1 end)

redis.register_function('callcost_time', function()
  redis.call('TIME')
  return 1
end)

redis.register_function('callcost_read', function(keys)
  redis.call('TIME')
  redis.call('MGET', unpack(keys))
  return 1
end)

-- callcost_write: the read and one write per counter, as take_many makes.
redis.register_function('callcost_write', function(keys)
  redis.call('TIME')
  local vals = redis.call('MGET', unpack(keys))
  for i = 1, #keys do
    if vals[i] then
      redis.call('INCRBY', keys[i], 1)
    else
      redis.call('SET', keys[i], 1, 'PX', 60000)
    end
  end
  return 1
end)

-- callcost_hash: a layout this library does not use, one hash per window
-- holding every counter as a field: one read and one write per call.
redis.register_function('callcost_hash', function(keys)
  redis.call('TIME')
  local vals = redis.call('HMGET', 'callcost:window', unpack(keys))
  local fields = {}
  for i = 1, #keys do
    fields[2 * i - 1], fields[2 * i] = keys[i], (tonumber(vals[i]) or 0) + 1
  end
  redis.call('HSET', 'callcost:window', unpack(fields))
  redis.call('PEXPIRE', 'callcost:window', 60000)
  return 1
end)

-- callcost_least: the least a script can do for these takes: decode each
-- op (memoized, as take_many does), decide on what MGET read, write the
-- admitted counter and pack the five values per take take_many replies.
local OPS = {}
redis.register_function('callcost_least', function(keys, args)
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local vals = redis.call('MGET', unpack(keys))
  local out, m = {}, 0
  for i = 1, #keys do
    local op = OPS[args[i + 1]]
    if not op then
      op = { struct.unpack('<dddddddd', args[i + 1]) }
      OPS[args[i + 1]] = op
    end
    local requests, period, hits = op[2], op[3], op[7]
    local reset = period - now % period
    local count = tonumber(vals[i]) or 0
    local room = requests - count
    if room >= hits then
      if vals[i] then
        redis.call('INCRBY', keys[i], hits)
      else
        redis.call('SET', keys[i], hits, 'PX', math.ceil(reset / 1000))
      end
      out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5], out[m + 6] = 5, 1, room - hits, reset, 0, hits
    else
      out[m + 1], out[m + 2], out[m + 3], out[m + 4], out[m + 5], out[m + 6] = 5, 0, room, reset, reset, 0
    end
    m = m + 6
  end
  return struct.pack('<' .. string.rep('d', m), unpack(out, 1, m))
end)
