--[[
  Takes one permit with a lease if one is free (a permit whose lease ran out is free again).

  Input:
    KEYS[1] total permits (a string; missing: never set)
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel "rlock__permits_channel:{<key>}"
    ARGV[1] the new permit's id
    ARGV[2] lease in ms
    ARGV[3] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"

  Output:
    nil when taken; else the ms until the first lease runs out (that permit comes back then,
    without a message), or -1 when there is no such bound (a release or a new total will say).
]]
--@include permits.lua
local now = nowMs()
local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
local free = freePermits(KEYS[1], KEYS[2], now)
if free and free >= 1 then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
  -- Expired permits nobody announced: the others this call found free wake as many waiters.
  if expired > 0 and free > 1 then
    redis.call(ARGV[3], KEYS[3], 'wake:' .. (free - 1) .. ':')
  end
  return nil
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
  return tonumber(first[2]) - now
end
return -1
