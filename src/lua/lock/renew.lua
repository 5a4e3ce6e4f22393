--[[
  The watchdog's batch: extends every lock in the batch that its owner still holds.

  Input:
    KEYS[1..n]   lock hash keys (all in one hash slot on Cluster)
    ARGV[1]      lease in ms
    ARGV[2..n+1] owner field of each key, in the same order

  Output:
    an array of n integers: 1 where the lease was extended, 0 where the owner no longer holds
    the lock (it expired, was force-unlocked or Redis lost it).
]]
--@include renewBatch.lua
return renewBatch(1, function(i, field)
  return renewHold(KEYS[i], field, ARGV[1])
end)
