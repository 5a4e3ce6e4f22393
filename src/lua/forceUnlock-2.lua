--[[
  Deletes the lock whoever holds it and wakes waiters at once.

  Input:
    KEYS[1] lock hash key
    KEYS[2] release channel
    ARGV[1] release message to publish
    ARGV[2] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"

  Output:
    1 when a lock was deleted, 0 when there was none.
]]
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0
