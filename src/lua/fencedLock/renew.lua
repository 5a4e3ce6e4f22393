--[[
  The watchdog's batch for fenced locks: extends every lock in the batch that its owner still
  holds, and its token key with it, so that the token key lives exactly as long as the lock
  (Redisson #6510: one key per lock name, kept forever, grew with the names).

  Input:
    KEYS[2i-1], KEYS[2i]  lock hash and token key of hold i (all in one slot on Cluster)
    ARGV[1]               lease in ms
    ARGV[i+1]             owner field of hold i

  Output:
    an array with, per hold, 1 where the lease was extended, 0 where the owner no longer holds
    the lock (it expired, was force-unlocked or Redis lost it).
]]
--@include renewBatch.lua
return renewBatch(2, function(i, field)
  if not renewHold(KEYS[2 * i - 1], field, ARGV[1]) then
    return false
  end
  redis.call('pexpire', KEYS[2 * i], ARGV[1])
  return true
end)
