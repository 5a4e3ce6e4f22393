--[[
  Takes the write lock for an owner when nobody holds the lock, or enters it again when the
  owner holds it. A refused writer that waits (ARGV[3] = 1) puts itself among the waiting
  writers, which keeps new readers out until the readers inside are gone.
  Writers take turns between clients: a client whose writer just passed the lock on while
  writers of other clients waited (KEYS[4], set by release-7.lua) does not take the free lock
  back until one of those took it, or the turn's short TTL ran out (a woken writer that is
  gone). Without it the releasing process, asking again at once, beat the woken writer of
  another process to the free lock almost every time.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    KEYS[4] writers' turn: the client that passed the lock on
    ARGV[1] lease in ms
    ARGV[2] writer field "<clientId>:<ownerId>:write"
    ARGV[3] "1" to register (or refresh) the caller as a waiting writer, "0" to only try
    ARGV[4] how long a waiting writer's entry lives without a refresh (heartbeat.lua), in ms
    ARGV[5] "1" when the owner believes it holds the write lock (a re-entry)

  Output:
    nil when the owner holds the write lock now ("afresh" instead when a re-entry, ARGV[5], found
    the lock free: its hold was lost and this one is new); "reading" when a re-entry finds its
    write gone but its own read holding the lock (its write lease ran out under its reads): an
    upgrade, which would wait for itself; otherwise how long to sleep at most: until the first
    holder's lease runs out, or what is left of the other clients' turn.
]]
--@include readWriteLock.lua
local lease, field = tonumber(ARGV[1]), ARGV[2]
local now = nowMs()

local function waitInLine()
  if ARGV[3] == '1' then
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), field)
    expireWithLastWriter(KEYS[3])
  end
end

purgeLeases(KEYS[1], KEYS[2], now)
if redis.call('exists', KEYS[1]) == 0 then
  if redis.call('get', KEYS[4]) == clientOfField(field) then
    waitInLine()
    return redis.call('pttl', KEYS[4])
  end
  redis.call('del', KEYS[4])
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('zrem', KEYS[3], field)
  takeHold(KEYS[1], KEYS[2], field, now, lease)
  -- A re-entry that found the lock free: its hold was lost, this one is new (lock/acquire-3.lua).
  if ARGV[5] == '1' then
    return 'afresh'
  end
  return nil
end
if redis.call('hexists', KEYS[1], field) == 1 then
  takeHold(KEYS[1], KEYS[2], field, now, lease)
  return nil
end
-- The owner's read field is its write field less ":write". Queued behind its own read, it waited
-- for good, and its entry among the waiting writers kept every other client's readers out. Only
-- for a re-entry: a read the owner never booked (a late reply, its give-back on the way) is
-- waited out as any other.
if ARGV[5] == '1' and redis.call('hexists', KEYS[1], string.sub(field, 1, -7)) == 1 then
  return 'reading'
end
waitInLine()
-- Until the first lease runs out, not the lock's PTTL (the longest one): a holder may release the
-- longest lease without freeing the lock, which publishes nothing, and the shorter one left may
-- then run out unreleased (its process gone), which publishes nothing either.
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] then
  return math.max(1, tonumber(first[2]) - now)
end
return redis.call('pttl', KEYS[1])
