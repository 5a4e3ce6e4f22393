--[[
  Deletes the fair lock (whoever holds it, or only while a given holder does) and hands it to
  the first live waiter.

  Input:
    KEYS[1] lock hash key
    KEYS[2] queue (zset, arrival order)
    KEYS[3] queue deadlines (zset, Redis ms)
    ARGV[1] queue timeout in ms
    ARGV[2] grant channel prefix "rlock__grant:{<lock key>}:"
    ARGV[3] publish command
    ARGV[4] "1" when PUBLISH's receiver count can be trusted
    ARGV[5] optional: remove the lock only if this holder holds it (holder.lua)

  Output:
    {1, field...} when the lock was deleted: the owner fields it had;
    {0, field...} when it was not: nobody holds it (no fields), or the owners that hold it instead;
    {-1} when the name is a read-write lock's (nothing removed).
]]
--@include fairQueue.lua
--@include holder.lua
-- A read-write lock's hash (it has a `mode`) is not this kind's: deleting it alone would leave
-- its readers' leases and waiting writers behind, a reader nobody sees blocking the writers.
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1}
end
local holders = redis.call('hkeys', KEYS[1])
if heldBy(holders, ARGV[5]) then
  redis.call('del', KEYS[1])
  local nowMs, nowUs = clock()
  grantNext(nowMs, nowUs, nil, tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4])
  return {1, unpack(holders)}
end
return {0, unpack(holders)}
