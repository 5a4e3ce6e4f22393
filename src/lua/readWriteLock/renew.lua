--[[
  The watchdog's batch: extends the lease of every hold in the batch that its owner still has,
  and only that one (another holder's lease is not this process's to extend: a dead reader must
  not be kept alive by a live one, Redisson #5462).

  Input:
    KEYS[2i-1], KEYS[2i]  lock hash and leases (zset) of hold i (all in one slot on Cluster)
    ARGV[1]               lease in ms
    ARGV[i+1]             holder field of hold i

  Output:
    an array with, per hold, 1 where its lease was extended, 0 where the owner no longer has it.
]]
--@include readWriteLock.lua
--@include renewBatch.lua
local now = nowMs()
local lease = tonumber(ARGV[1])
return renewBatch(2, function(i, field)
  local lock, leases = KEYS[2 * i - 1], KEYS[2 * i]
  purgeLeases(lock, leases, now)
  local current = redis.call('zscore', leases, field)
  if not current then
    return false
  end
  if tonumber(current) < now + lease then
    redis.call('zadd', leases, now + lease, field)
    expireWithLongestLease(lock, leases)
  end
  return true
end)
