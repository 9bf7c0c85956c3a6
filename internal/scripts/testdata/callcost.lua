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
