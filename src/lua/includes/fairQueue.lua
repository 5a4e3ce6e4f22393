-- The fair lock's queue, shared by its scripts (pulled in with --@include).
--   KEYS[1] the lock hash (field "<clientId>:<ownerId>" -> hold count, as the plain lock)
--   KEYS[2] the queue: zset member -> arrival order
--   KEYS[3] the queue deadlines: zset member -> Redis time (ms) after which the entry is dead
-- A member is "<leaseMs>:<clientId>:<ownerId>": the waiter's lease rides along, so whoever hands
-- the lock over knows how long the grant may live. See queue.lua for the deadlines.

--@include queue.lua

-- Redis's clock, read once per script call (TIME): in ms for the queue's deadlines, and in µs for
-- a grant's stamp. An attempt that found its waiter not granted answers the same stamp, so that
-- the waiter can tell a grant made before that attempt (run out or taken away since: its message
-- came late) from one made after. Grants made in one call share its stamp; calls never do.
local function clock()
  local t = redis.call('time')
  local seconds, micros = tonumber(t[1]), tonumber(t[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end

-- Hands the free lock to the first live waiter (direct handoff: the waiter need not come back to
-- ask). Goes down the queue until one is granted; `self` is the caller's own member, which is
-- returned without a message (the caller takes the lock itself: it is alive, it is calling).
-- An entry past its deadline is dead, and so is every other entry past it: they all go at once,
-- so k dead waiters cost one queue timeout together (queue.lua's purgeExpired). A grant lives
-- min(lease, queueTimeout): a waiter that is gone (stopped) holds the lock up the queue timeout
-- at most; a live one extends it. PUBLISH reaching nobody means the waiter cannot hear now: its
-- process is gone (its subscription went with its connection), or its subscriber is reconnecting.
-- It is passed over in the same call, but keeps its place: a live one asks again once subscribed
-- (and its heartbeat keeps the entry), so a blip costs it the grants made meanwhile, not its turn;
-- a dead one's entries run out at their deadline, passed over by every grant until then. Unless
-- receivers cannot be counted (classic pub/sub on a Cluster counts one node only): then the grant
-- stands. `localClient` (a release's own client) gets no message either: its waiter is told from
-- the script's reply. The message (and the told field) is "<field>@<µs>", `nowUs` being the
-- grant's time (see clock).
-- Returns the member granted, or false; and "<field>@<µs>" when it went to `localClient`
-- without a message.
local function grantNext(nowMs, nowUs, self, queueTimeout, channelPrefix, publishCommand, trustReceivers, localClient)
  -- %d: Lua's own number-to-string keeps 14 digits, which would round the stamp to 100 µs.
  local stamp = '@' .. string.format('%d', nowUs)
  -- Entries before `at` are live but could not hear: passed over, in place.
  local at = 0
  while true do
    local head = redis.call('zrange', KEYS[2], at, at)[1]
    if not head then
      return false
    end
    if head == self then
      removeEntry(head)
      return head
    end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline == nil or deadline <= nowMs then
      -- Dead: it and every other dead entry go in one sweep (and a head without a deadline). None
      -- of those passed over is dead, so `at` names the next entry now.
      purgeExpired(nowMs)
      redis.call('zrem', KEYS[2], head)
    else
      local lease, field = string.match(head, '^(%d+):(.*)$')
      local clientId = string.match(field, '^([^:]*):')
      local told = clientId == localClient
      local grant = field .. stamp
      if told or redis.call(publishCommand, channelPrefix .. clientId, grant) > 0 or trustReceivers ~= '1' then
        removeEntry(head)
        redis.call('hset', KEYS[1], field, 1)
        redis.call('pexpire', KEYS[1], math.min(tonumber(lease), queueTimeout))
        return head, told and grant or nil
      end
      at = at + 1
    end
  end
end
