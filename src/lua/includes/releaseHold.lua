-- Gives back one hold of `field` on the lock hash `lockKey`; on the last one deletes the lock
-- and calls `freed()` (which wakes waiters or hands the lock on). Answers nil when the owner
-- holds nothing, 0 when holds remain, otherwise what `freed()` answers, or 1.
--
-- The latch makes a resent partial release answer what the first one did instead of
-- decrementing twice (Redisson #4871, #6651): ioredis resends a command whose reply was lost to
-- a reconnect. A full release needs no latch: its resend finds the owner's field gone and
-- answers nil, which the client, knowing the connection dropped meanwhile and that it held
-- exactly one hold, reads as "released". Not writing it saves a DEL on every common unlock.
--
-- releaseOwnHold is the general form: on the owner's last hold it calls `lastHold()` instead,
-- which decides what is left of the lock (a read-write lock keeps its other holders).
local function releaseOwnHold(lockKey, latchKey, field, latchTtl, lastHold)
  local done = redis.call('get', latchKey)
  if done then
    return tonumber(done)
  end
  if redis.call('hexists', lockKey, field) == 0 then
    return nil
  end
  if redis.call('hincrby', lockKey, field, -1) <= 0 then
    return lastHold() or 1
  end
  redis.call('set', latchKey, 0, 'px', latchTtl)
  return 0
end

local function releaseHold(lockKey, latchKey, field, latchTtl, freed)
  return releaseOwnHold(lockKey, latchKey, field, latchTtl, function()
    redis.call('del', lockKey)
    return freed()
  end)
end
