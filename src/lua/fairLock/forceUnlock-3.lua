--[[
  Deletes the fair lock whoever holds it and hands it to the first live waiter.

  Input:
    KEYS[1] lock hash key
    KEYS[2] queue (zset, arrival order)
    KEYS[3] queue deadlines (zset, Redis ms)
    ARGV[1] queue timeout in ms
    ARGV[2] grant channel prefix "rlock__grant:{<lock key>}:"
    ARGV[3] publish command
    ARGV[4] "1" when PUBLISH's receiver count can be trusted

  Output:
    the owner fields the lock had when it was deleted; empty when there was no lock.
]]
--@include fairQueue.lua
local holders = redis.call('hkeys', KEYS[1])
if #holders > 0 then
  redis.call('del', KEYS[1])
  local nowMs, nowUs = clock()
  grantNext(nowMs, nowUs, nil, tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4])
end
return holders
