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
    ARGV[5] optional: the owner field of a waiter of the same client to hand the lock to
            instead of releasing it (no message: its client wakes it without Redis)
    ARGV[6] with ARGV[5]: that waiter's lease in ms

  Output:
    nil when the owner holds nothing; 0 when holds remain; 1 when the lock was released;
    2 when it was handed to ARGV[5].

  See includes/releaseHold.lua for the latch.
]]
--@include releaseHold.lua
return releaseHold(KEYS[1], KEYS[3], ARGV[1], ARGV[3], function()
  if ARGV[5] and ARGV[5] ~= '' then
    redis.call('hset', KEYS[1], ARGV[5], 1)
    redis.call('pexpire', KEYS[1], ARGV[6])
    return 2
  end
  redis.call(ARGV[4], KEYS[2], ARGV[2])
end)
