--[[
  Counts down by one; at zero deletes the count and wakes every awaiter. Once per request: the
  answer is kept in the request's latch (expiring by itself), so that a countDown that ioredis
  resends after a reconnect answers what the first run did instead of counting twice (which
  would open the latch one count early).

  Input:
    KEYS[1] the count
    KEYS[2] channel "rlock__latch:{<key>}"
    KEYS[3] latch of this request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>"
    ARGV[1] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[2] latch TTL in ms

  Output:
    the count left (never below 0: a count down on an open latch changes nothing).
]]
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[1], KEYS[2], 'wake:all')
  left = 0
end
redis.call('set', KEYS[3], left, 'px', ARGV[2])
return left
