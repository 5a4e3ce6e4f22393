--[[
  Counts down by one; at zero deletes the count and wakes every awaiter.

  Input:
    KEYS[1] the count
    KEYS[2] channel "rlock__latch:{<key>}"
    ARGV[1] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"

  Output:
    the count left (never below 0: a count down on an open latch changes nothing).
]]
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[1], KEYS[2], 'wake:all')
  return 0
end
return left
