-- The fair lock's queue, shared by its scripts (pulled in with --@include).
--   KEYS[1] the lock hash (field "<clientId>:<ownerId>" -> hold count, as the plain lock)
--   KEYS[2] the queue: zset member -> arrival order
--   KEYS[3] the queue deadlines: zset member -> Redis time (ms) after which the entry is dead
-- A member is "<leaseMs>:<clientId>:<ownerId>": the waiter's lease rides along, so whoever hands
-- the lock over knows how long the grant may live. See queue.lua for the deadlines.

--@include queue.lua

-- Redis's clock in µs (TIME): a grant is stamped with it, and so is an attempt that found its
-- waiter not granted, so that the waiter can tell a grant made before that attempt (run out or
-- taken away since: its message came late) from one made after.
local function nowMicros()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Hands the free lock to the first live waiter (direct handoff: the waiter need not come back to
-- ask). Pops heads until one is granted; `self` is the caller's own member, which is returned
-- without a message (the caller takes the lock itself). A grant lives min(lease, queueTimeout):
-- a waiter that is gone (stopped) holds the lock up the queue timeout at most; a live one
-- extends it. PUBLISH reaching nobody means the waiter's process is gone (its subscription
-- went with its connection): skipped in the same call, unless receivers cannot be counted
-- (classic pub/sub on a Cluster counts one node only). `localClient` (a release's own client)
-- gets no message either: its waiter is told from the script's reply (it is alive: it is
-- calling). The message (and the told field) is "<field>@<µs>", the grant's time by nowMicros.
-- Returns the member granted, or false; and "<field>@<µs>" when it went to `localClient`
-- without a message.
local function grantNext(now, self, queueTimeout, channelPrefix, publishCommand, trustReceivers, localClient)
  purgeExpired(now)
  for head in popHead do
    if head == self then
      return head
    end
    local lease, field = string.match(head, '^(%d+):(.*)$')
    local clientId = string.match(field, '^([^:]*):')
    local told = clientId == localClient
    -- %d: Lua's own number-to-string keeps 14 digits, which would round the stamp to 100 µs.
    local grant = field .. '@' .. string.format('%d', nowMicros())
    if told or redis.call(publishCommand, channelPrefix .. clientId, grant) > 0 or trustReceivers ~= '1' then
      redis.call('hset', KEYS[1], field, 1)
      redis.call('pexpire', KEYS[1], math.min(tonumber(lease), queueTimeout))
      return head, told and grant or nil
    end
  end
  return false
end
