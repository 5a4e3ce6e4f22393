--[[
  Takes the lock for an owner, or enters it again when the owner already holds it; when it is
  someone else's and the caller waits (join = 1), puts the caller's client in the queue of
  waiting clients, so that a release wakes it in its turn.

  Input:
    KEYS[1] lock hash key
    KEYS[2] waiting clients (zset, arrival order), "rlock__clients:{<lock key>}"
    KEYS[3] their deadlines (zset, Redis ms), "rlock__clients_timeout:{<lock key>}"
    ARGV[1] lease in ms (the key's new TTL; a re-entry only lengthens it)
    ARGV[2] owner field, "<clientId>:<ownerId>"
    ARGV[3] "1" when the caller waits (its client is subscribed to its wake channel), else "0"
    ARGV[4] queue timeout in ms: an entry not refreshed for this long is dead
    ARGV[5] "1" when the owner believes it holds the lock (a re-entry); optional

  Output:
    nil on success (the owner's hold count went up by one); "afresh" instead when ARGV[5] said
    the owner held the lock but the lock was free: its hold was lost (force-unlocked, expired, a
    restart) and this is a new one, which the caller's scope must be told of;
    otherwise the lock's remaining TTL in ms (PTTL), so the caller knows how long to wait.
]]
--@include clientQueue.lua
--@include lease.lua
local free = redis.call('exists', KEYS[1]) == 0
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if free then
    redis.call('pexpire', KEYS[1], ARGV[1])
  else
    lengthenLease(KEYS[1], ARGV[1])
  end
  if ARGV[3] == '1' then
    -- The client's other waiters, if any, need no entry while it holds the lock: its release
    -- hands the lock to them or queues the client again (release-4.lua).
    removeEntry(clientOf(ARGV[2]))
  end
  if free and ARGV[5] == '1' then
    return 'afresh'
  end
  return nil
end
if ARGV[3] == '1' then
  enqueue(clientOf(ARGV[2]), nowMs(), tonumber(ARGV[4]))
end
return redis.call('pttl', KEYS[1])
