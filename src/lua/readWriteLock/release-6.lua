--[[
  Gives back one read or write hold of an owner. When the owner's last hold of that kind goes:
  a write release lets the readers in (every waiting reader of every process is woken, and the
  waiting writers' entries are cleared: it is the readers' turn) and, when the lock is free,
  one writer per process; a read release that frees the lock wakes one writer per process.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    KEYS[4] reader channel
    KEYS[5] writer channel
    KEYS[6] latch key of this release request (see includes/releaseHold.lua)
    ARGV[1] holder field: "<clientId>:<ownerId>" (read) or "<clientId>:<ownerId>:write"
    ARGV[2] latch TTL in ms
    ARGV[3] publish command ("publish" or "spublish")
    ARGV[4] message waking every waiter of a process
    ARGV[5] message waking one

  Output:
    nil when the owner holds nothing of that kind; 0 when holds remain; 1 when its last one went.
]]
--@include readWriteLock.lua
--@include releaseHold.lua
local field = ARGV[1]
purgeLeases(KEYS[1], KEYS[2], nowMs())
return releaseOwnHold(KEYS[1], KEYS[6], field, ARGV[2], function()
  redis.call('hdel', KEYS[1], field)
  redis.call('zrem', KEYS[2], field)
  local free = redis.call('zcard', KEYS[2]) == 0
  if free then
    redis.call('del', KEYS[1], KEYS[2])
  else
    expireWithLongestLease(KEYS[1], KEYS[2])
  end
  if isWriteField(field) then
    if not free then
      redis.call('hset', KEYS[1], 'mode', 'read') -- the writer keeps its reads: a downgrade
    end
    redis.call('del', KEYS[3])
    redis.call(ARGV[3], KEYS[4], ARGV[4])
  end
  if free then
    redis.call(ARGV[3], KEYS[5], ARGV[5])
  end
end)
