--[[
  Takes a read hold for an owner. Readers share the lock; a writer excludes them. Once a writer
  waits, owners that hold nothing yet wait behind it (no writer starvation); an owner that
  already reads, or holds the write lock (a downgrade), is never refused, or it would deadlock
  on its own hold.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    ARGV[1] lease in ms
    ARGV[2] reader field "<clientId>:<ownerId>"

  Output:
    nil when the owner holds one more read; otherwise how long to sleep at most, in ms: what is
    left of the writer's lease behind a writer, the waiting writers' PTTL behind their entries
    (a write release wakes the readers sooner).
]]
--@include readWriteLock.lua
local lease, field = tonumber(ARGV[1]), ARGV[2]
local now = nowMs()
purgeLeases(KEYS[1], KEYS[2], now)
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode and redis.call('exists', KEYS[1]) == 1 then
  -- A hash with no mode is another kind of lock under this name (plain, fair, fenced): held, as
  -- its own acquire scripts take a read-write hash to be. Its releases publish elsewhere: the
  -- PTTL bounds the sleep.
  return redis.call('pttl', KEYS[1])
end
if redis.call('hexists', KEYS[1], field) == 1 or (mode == 'write' and redis.call('hexists', KEYS[1], field .. WRITE_SUFFIX) == 1) then
  takeHold(KEYS[1], KEYS[2], field, now, lease)
  return nil
end
if mode == 'write' then
  -- Until the writer's own lease ends, not the key's PTTL: the key lives as long as the longest
  -- lease, which may be a read the writer took (a downgrade) and the watchdog keeps after the
  -- write hold ran out; nothing is published when it does, and readers slept that whole read lease.
  local holders = redis.call('zrange', KEYS[2], 0, -1, 'withscores')
  for i = 1, #holders, 2 do
    if isWriteField(holders[i]) then
      return math.max(0, tonumber(holders[i + 1]) - now)
    end
  end
  return redis.call('pttl', KEYS[1])
end
if writersWaiting(KEYS[3], now) then
  return redis.call('pttl', KEYS[3])
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
takeHold(KEYS[1], KEYS[2], field, now, lease)
return nil
