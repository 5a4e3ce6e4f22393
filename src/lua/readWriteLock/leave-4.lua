--[[
  A waiting writer gives up (timeout, abort, close, error): it leaves the waiting writers, and
  when it was the last one, the readers it kept out are woken.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    KEYS[4] reader channel
    ARGV[1] writer field "<clientId>:<ownerId>:write"
    ARGV[2] publish command
    ARGV[3] message waking every waiter of a process

  Output:
    1 when readers were woken, 0 otherwise.
]]
--@include readWriteLock.lua
if redis.call('zrem', KEYS[3], ARGV[1]) == 1 and not writersWaiting(KEYS[3], nowMs()) then
  redis.call(ARGV[2], KEYS[4], ARGV[3])
  return 1
end
return 0
