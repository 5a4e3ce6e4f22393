--[[
  The last waiter of a client on the lock stopped waiting (acquired elsewhere, timed out,
  aborted, closed): the client leaves the queue of waiting clients. A wake-up it may have been
  sent meanwhile is passed on to the next client when the lock is free.

  Input:
    KEYS[1] lock hash key
    KEYS[2] waiting clients (zset, arrival order)
    KEYS[3] their deadlines (zset, Redis ms)
    ARGV[1] the clientId
    ARGV[2] publish command
    ARGV[3] wake channel prefix "rlock__channel:{<lock key>}:"
    ARGV[4] "1" when PUBLISH's receiver count can be trusted

  Output:
    1 when the lock was free and the next client was woken, else 0.
]]
--@include clientQueue.lua
removeEntry(ARGV[1])
if redis.call('exists', KEYS[1]) == 0 and wakeNextClient(nowMs(), ARGV[1], ARGV[3], ARGV[2], ARGV[4], ARGV[1]) then
  return 1
end
return 0
