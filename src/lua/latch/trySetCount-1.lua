--[[
  Sets the latch's count, only if none is set (a latch that reached 0 was deleted: it can be
  set again).

  Input:
    KEYS[1] the count (a string; missing: open)
    ARGV[1] count (>= 1)

  Output:
    1 when set, 0 when a count was set already.
]]
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
return 1
