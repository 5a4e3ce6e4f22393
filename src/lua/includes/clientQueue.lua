-- The plain lock's queue of waiting clients, shared by its scripts (pulled in with --@include).
--   KEYS[1] the lock hash (field "<clientId>:<ownerId>" -> hold count)
--   KEYS[2] the queue: clientId -> arrival order
--   KEYS[3] the deadlines: clientId -> Redis time (ms); the client's heartbeat refreshes them
-- One entry per client, not per waiter: a client wakes one of its own waiters when its turn
-- comes, and hands the lock between its waiters itself (RLock's cohorting). So a release wakes
-- exactly one process, whatever the number of processes waiting.

--@include queue.lua

local function clientOf(field)
  return string.match(field, '^([^:]*):')
end

-- Wakes the first live client in the queue other than `self` (the releasing client, which
-- leaves the queue here: it re-enters at the back when it still has waiters) and takes it out
-- of the queue: its woken waiter tries again, and queues the client again if someone barged in.
-- PUBLISH reaching nobody means the client's process is gone: skipped in the same call, unless
-- receivers cannot be counted (classic pub/sub on a Cluster counts one node only); a client
-- that is stopped (SIGSTOP) takes its wake-up with it, which the other clients' heartbeats
-- notice (the lock is free while they wait). Returns whether some client was woken.
local function wakeNextClient(now, self, channelPrefix, publishCommand, trustReceivers, message)
  purgeExpired(now)
  for head in popHead do
    if head ~= self and (redis.call(publishCommand, channelPrefix .. head, message) > 0 or trustReceivers ~= '1') then
      return true
    end
  end
  return false
end

-- Whether a live client other than `self` waits.
local function othersWaiting(now, self)
  purgeExpired(now)
  local first = redis.call('zrange', KEYS[2], 0, 1)
  return (first[1] ~= nil and first[1] ~= self) or first[2] ~= nil
end
