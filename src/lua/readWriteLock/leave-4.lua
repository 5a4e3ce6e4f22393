--[[
  A waiting writer gives up (timeout, abort, close, error): it leaves the waiting writers, and
  when it was the last one, the readers it kept out are woken.
  A write release clears every entry and wakes one writer per client, so the other parked writers
  of the leaver's client may have no entry: the caller is told whether its client still has a
  writer in line, and when not, wakes another of its parked writers, which queues again (else that
  one slept out the bound of its last attempt while new readers kept the lock held).

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    KEYS[4] reader channel
    ARGV[1] writer field "<clientId>:<ownerId>:write"
    ARGV[2] publish command
    ARGV[3] message waking every waiter of a process

  Output:
    1 when another writer of the caller's client is still in line, 0 otherwise.
]]
--@include readWriteLock.lua
local now = nowMs()
if redis.call('zrem', KEYS[3], ARGV[1]) == 1 and not writersWaiting(KEYS[3], now) then
  redis.call(ARGV[2], KEYS[4], ARGV[3])
  return 0
end
if clientWriting(KEYS[3], now, clientOfField(ARGV[1])) then
  return 1
end
return 0
