--[[
  Deletes the lock whoever holds it and wakes waiters at once.

  Input:
    KEYS[1] lock hash key
    KEYS[2] release channel
    ARGV[1] release message to publish
    ARGV[2] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"

  Output:
    the owner fields ("<clientId>:<ownerId>") the lock had when it was deleted; empty when there
    was no lock. Naming them lets an operator (and the soak checker) know exactly whose hold a
    force removed, instead of guessing from timing.
]]
local holders = redis.call('hkeys', KEYS[1])
if #holders > 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return holders
