--[[
  Gives back one read or write hold of an owner. When the owner's last hold of that kind goes:
  a write release lets the readers in (every waiting reader of every process is woken, and the
  waiting writers' entries are cleared: it is the readers' turn) and wakes one writer per
  process, which asks again (and queues anew while readers hold: a downgrade); a read release
  that frees the lock wakes one writer per process.
  A write release that frees the lock while writers of other clients waited gives them the
  turn (KEYS[7], see acquireWrite-4.lua): the releasing client's writers stand back for at most
  ARGV[6] ms, until one of them took it.

  Input:
    KEYS[1..5] lock hash, leases (zset), waiting writers (zset), reader channel, writer channel
    KEYS[6] latch key of this release request (see includes/releaseHold.lua)
    KEYS[7] writers' turn
    ARGV[1] holder field: "<clientId>:<ownerId>" (read) or "<clientId>:<ownerId>:write"
    ARGV[2] latch TTL in ms
    ARGV[3] publish command ("publish" or "spublish")
    ARGV[4] message waking every waiter of a process
    ARGV[5] message waking one
    ARGV[6] how long the releasing client's writers stand back (ms)

  Output:
    nil when the owner holds nothing of that kind; 0 when holds remain; 1 when its last one went.
]]
--@include readWriteLock.lua
--@include releaseHold.lua
local field = ARGV[1]
local now = nowMs()
purgeLeases(KEYS[1], KEYS[2], now)
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
    if free and otherClientsWriting(KEYS[3], now, clientOfField(field)) then
      redis.call('set', KEYS[7], clientOfField(field), 'px', ARGV[6])
    end
    redis.call('del', KEYS[3])
    redis.call(ARGV[3], KEYS[4], ARGV[4])
  end
  -- A downgrade (the writer keeps its reads) also wakes the writers: their entries are gone, and
  -- with readers streaming in no read release may free the lock; they ask again now, which
  -- queues them anew and lets in no reader after those inside.
  if free or isWriteField(field) then
    redis.call(ARGV[3], KEYS[5], ARGV[5])
  end
end)
