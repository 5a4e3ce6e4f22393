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

  See includes/releaseHold.lua for the latch.
]]
--@include releaseHold.lua
return releaseHold(KEYS[1], KEYS[3], ARGV[1], ARGV[3], function()
  redis.call(ARGV[4], KEYS[2], ARGV[2])
end)
