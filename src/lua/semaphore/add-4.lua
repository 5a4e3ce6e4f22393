--[[
  Adds permits (release, or addPermits with a delta that may be negative) and wakes as many
  waiters as the free permits can now serve.

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel "rlock__semaphore:{<key>}"
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    ARGV[1] permits to add (may be negative)
    ARGV[2] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[3] the releasing client's id (named in the message)

  Output:
    {free permits after the change, clients the wake-up message reached (0: none sent)}
]]
--@include semaphoreWake.lua
--@include kind.lua
local free = incrByMarked(KEYS[1], ARGV[1], KEYS[4], 'semaphore')
local reached = 0
if tonumber(ARGV[1]) > 0 then
  reached = wakeWaiters(KEYS[2], KEYS[3], free, ARGV[2], ARGV[3])
end
return {free, reached}
