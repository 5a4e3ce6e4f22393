--[[
  A waiter gives up (timeout, abort, close, error): it leaves the queue, and a grant that reached
  the lock meanwhile without the waiter noticing is passed on to the next in line.

  Input:
    KEYS[1] lock hash key
    KEYS[2] queue (zset, arrival order)
    KEYS[3] queue deadlines (zset, Redis ms)
    ARGV[1] member "<leaseMs>:<clientId>:<ownerId>" (the caller holds nothing: a waiter never does)
    ARGV[2] queue timeout in ms
    ARGV[3] grant channel prefix "rlock__grant:{<lock key>}:"
    ARGV[4] publish command
    ARGV[5] "1" when PUBLISH's receiver count can be trusted

  Output:
    1 when a grant was passed on, 0 when the waiter only left the queue.
]]
--@include fairQueue.lua
local member = ARGV[1]
removeEntry(member)
if redis.call('hexists', KEYS[1], string.match(member, '^%d+:(.*)$')) == 1 then
  redis.call('del', KEYS[1])
  local nowMs, nowUs = clock()
  grantNext(nowMs, nowUs, nil, tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5])
  return 1
end
return 0
