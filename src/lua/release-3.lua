--[[
  Gives back one hold of the owner; on the last one deletes the lock and wakes waiters.

  Input:
    KEYS[1] lock hash key
    KEYS[2] release channel, "rlock__channel:{<lock key>}" (named in KEYS so that Cluster
            checks it shares the lock's slot)
    KEYS[3] latch key of this release request, "rlock__unlock_latch:{<lock key>}:<requestId>"
            (written only by a partial release)
    ARGV[1] owner field, "<clientId>:<ownerId>"
    ARGV[2] release message to publish
    ARGV[3] latch TTL in ms
    ARGV[4] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"

  Output:
    nil when the owner holds nothing; 0 when holds remain; 1 when the lock was released.

  The latch makes a resent partial release answer what the first one did instead of
  decrementing twice (Redisson #4871, #6651): ioredis resends a command whose reply was lost to
  a reconnect. A full release needs no latch: its resend finds the owner's field gone and
  answers nil, which the client, knowing the connection dropped meanwhile and that it held
  exactly one hold, reads as "released". Not writing it saves a DEL on every common unlock.
]]
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[2])
  return 1
end
redis.call('set', KEYS[3], 0, 'px', ARGV[3])
return 0
