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
-- Entries past their deadline are dead and go first, all at once, so k dead waiters cost one
-- queue timeout together (queue.lua's purgeExpired). A grant lives min(lease, queueTimeout): a
-- waiter that is gone (stopped) holds the lock up the queue timeout at most; a live one extends
-- it. PUBLISH reaching nobody means the waiter's client cannot hear now: its process is gone (its
-- subscription went with its connection), or its subscriber is reconnecting. Its entries are
-- passed over in the same call but keep their place: a live client asks again once subscribed
-- (its heartbeat keeps the entries meanwhile), so a blip costs its waiters the grants made
-- meanwhile, not their turn; a dead one's entries run out at their deadline. A client found deaf
-- is not published to again in the call (its receiver count cannot change inside a script), and
-- the queue is read in batches, so a dead process's k entries cost each grant one PUBLISH and a
-- read of k members. Unless receivers cannot be counted (classic pub/sub on a Cluster counts one
-- node only): then the grant stands. `localClient` (a release's own client) gets no message
-- either: its waiter is told from the script's reply. The message (and the told field) is
-- "<field>@<µs>:<ttl ms>", `nowUs` being the grant's time (see clock) and ttl the grant's lease:
-- the waiter dates its hold by both, as the queue timeout that capped it is the granter's, which
-- need not be its own.
-- Returns the member granted, or false; and "<field>@<µs>:<ttl ms>" when it went to
-- `localClient` without a message.
local function grantNext(nowMs, nowUs, self, queueTimeout, channelPrefix, publishCommand, trustReceivers, localClient)
  -- %d: Lua's own number-to-string keeps 14 digits, which would round the stamp to 100 µs.
  local stamp = '@' .. string.format('%d', nowUs)
  purgeExpired(nowMs)
  local deaf = {}
  -- Entries before `from` were passed over, in place. The head alone first: it is granted
  -- unless its client cannot hear.
  local from, size = 0, 1
  while true do
    local batch = redis.call('zrange', KEYS[2], from, from + size - 1)
    size = 32
    if #batch == 0 then
      return false
    end
    local kept = #batch
    for i = 1, #batch do
      local member = batch[i]
      if member == self then
        removeEntry(member)
        return member
      end
      local lease, field = string.match(member, '^(%d+):(.*)$')
      local clientId = string.match(field, '^([^:]*):')
      if not deaf[clientId] then
        if not redis.call('zscore', KEYS[3], member) then
          -- No deadline (never refreshed): dead.
          redis.call('zrem', KEYS[2], member)
          kept = kept - 1
        else
          local told = clientId == localClient
          local ttl = math.min(tonumber(lease), queueTimeout)
          local grant = field .. stamp .. ':' .. ttl
          if told or redis.call(publishCommand, channelPrefix .. clientId, grant) > 0 or trustReceivers ~= '1' then
            removeEntry(member)
            redis.call('hset', KEYS[1], field, 1)
            redis.call('pexpire', KEYS[1], ttl)
            return member, told and grant or nil
          end
          deaf[clientId] = true
        end
      end
    end
    from = from + kept
  end
end
