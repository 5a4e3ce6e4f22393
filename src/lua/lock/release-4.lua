--[[
  Gives back one hold of the owner; on the last one hands the lock to a waiter of the same
  client, or deletes it and wakes the next waiting client.

  Input:
    KEYS[1] lock hash key
    KEYS[2] waiting clients (zset, arrival order)
    KEYS[3] their deadlines (zset, Redis ms)
    KEYS[4] latch key of this release request, "rlock__unlock_latch:{<lock key>}:<requestId>"
    ARGV[1] owner field, "<clientId>:<ownerId>"
    ARGV[2] latch TTL in ms
    ARGV[3] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"
    ARGV[4] wake channel prefix "rlock__channel:{<lock key>}:" (a client's id is appended)
    ARGV[5] "1" when PUBLISH's receiver count can be trusted (see wakeNextClient)
    ARGV[6] queue timeout in ms
    ARGV[7] "1" when the releasing client has waiters parked on the lock (it stays in line)
    ARGV[8] "1" when the client has handed the lock on often enough in a row: it goes to
            another client if one waits
    ARGV[9] optional: the owner field of a waiter of the same client to hand the lock to
            (no message: its client wakes it without Redis)
    ARGV[10] with ARGV[9]: that waiter's lease in ms

  Output:
    nil when the owner holds nothing; 0 when holds remain; 2 when the lock went to ARGV[9];
    1 when it was released (another client woken while the caller stays in line, or nobody
    waits); 3 when it was released and no other client waits: the caller wakes one of its own
    waiters; 4 when it was released and another client woken while the caller has no waiters:
    the caller lets that client's waiter go first (its next callers hold back a moment).

  See includes/releaseHold.lua for the latch.
]]
--@include clientQueue.lua
--@include releaseHold.lua
return releaseHold(KEYS[1], KEYS[4], ARGV[1], ARGV[2], function()
  local self = clientOf(ARGV[1])
  local now = nowMs()
  if ARGV[9] and ARGV[9] ~= '' and (ARGV[8] ~= '1' or not othersWaiting(now, self)) then
    redis.call('hset', KEYS[1], ARGV[9], 1)
    redis.call('pexpire', KEYS[1], ARGV[10])
    return 2
  end
  local woken = wakeNextClient(now, self, ARGV[4], ARGV[3], ARGV[5], self)
  -- The woken client may have been ahead of this one (this one queued behind it and took the
  -- lock by a handoff of its own): this one leaves all the same, and re-enters at the back
  -- below if it still has waiters. Left behind, an entry with no waiter behind it was woken for
  -- nothing by a later release on a Cluster, where receivers are not counted.
  if woken then
    removeEntry(self)
  end
  if ARGV[7] == '1' then
    if not woken then
      return 3
    end
    enqueue(self, now, tonumber(ARGV[6]))
  elseif woken then
    return 4
  end
  return 1
end)
