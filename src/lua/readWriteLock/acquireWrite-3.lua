--[[
  Takes the write lock for an owner when nobody holds the lock, or enters it again when the
  owner holds it. A refused writer that waits (ARGV[3] = 1) puts itself among the waiting
  writers, which keeps new readers out until the readers inside are gone.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    ARGV[1] lease in ms
    ARGV[2] writer field "<clientId>:<ownerId>:write"
    ARGV[3] "1" to register (or refresh) the caller as a waiting writer, "0" to only try
    ARGV[4] how long a waiting writer's entry lives without a refresh (heartbeat.lua), in ms

  Output:
    nil when the owner holds the write lock now; otherwise the lock's PTTL in ms.
]]
--@include readWriteLock.lua
local lease, field = tonumber(ARGV[1]), ARGV[2]
local now = nowMs()
purgeLeases(KEYS[1], KEYS[2], now)
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('zrem', KEYS[3], field)
  takeHold(KEYS[1], KEYS[2], field, now, lease)
  return nil
end
if redis.call('hexists', KEYS[1], field) == 1 then
  takeHold(KEYS[1], KEYS[2], field, now, lease)
  return nil
end
if ARGV[3] == '1' then
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), field)
  local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  redis.call('pexpireat', KEYS[3], last[2])
end
return redis.call('pttl', KEYS[1])
