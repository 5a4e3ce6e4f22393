--[[
  Deletes the lock whoever holds it and wakes the next waiting client at once.

  Input:
    KEYS[1] lock hash key
    KEYS[2] waiting clients (zset, arrival order)
    KEYS[3] their deadlines (zset, Redis ms)
    ARGV[1] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"
    ARGV[2] wake channel prefix "rlock__channel:{<lock key>}:"
    ARGV[3] "1" when PUBLISH's receiver count can be trusted
    ARGV[4] optional: remove the lock only if this holder holds it (holder.lua)

  Output:
    {1, field...} when the lock was deleted: the owner fields it had;
    {0, field...} when it was not: nobody holds it (no fields), or the owners that hold it instead;
    {-1} when the name is a read-write lock's (nothing removed).
    Naming them lets an operator (and the soak checker) know exactly whose hold a force removed,
    instead of guessing from timing.
]]
--@include clientQueue.lua
--@include holder.lua
-- A read-write lock's hash (it has a `mode`) is not this kind's: deleting it alone would leave
-- its readers' leases and waiting writers behind, a reader nobody sees blocking the writers.
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1}
end
local holders = redis.call('hkeys', KEYS[1])
if heldBy(holders, ARGV[4]) then
  redis.call('del', KEYS[1])
  wakeNextClient(nowMs(), nil, ARGV[2], ARGV[1], ARGV[3], '0')
  return {1, unpack(holders)}
end
return {0, unpack(holders)}
