-- Gives back one hold of `field` on the lock hash `lockKey`; on the last one calls `freed()`
-- (which deletes the lock and wakes or hands it on). Answers nil when the owner holds nothing,
-- 0 when holds remain, 1 when the lock was released.
--
-- The latch makes a resent partial release answer what the first one did instead of
-- decrementing twice (Redisson #4871, #6651): ioredis resends a command whose reply was lost to
-- a reconnect. A full release needs no latch: its resend finds the owner's field gone and
-- answers nil, which the client, knowing the connection dropped meanwhile and that it held
-- exactly one hold, reads as "released". Not writing it saves a DEL on every common unlock.
local function releaseHold(lockKey, latchKey, field, latchTtl, freed)
  local done = redis.call('get', latchKey)
  if done then
    return tonumber(done)
  end
  if redis.call('hexists', lockKey, field) == 0 then
    return nil
  end
  if redis.call('hincrby', lockKey, field, -1) <= 0 then
    redis.call('del', lockKey)
    freed()
    return 1
  end
  redis.call('set', latchKey, 0, 'px', latchTtl)
  return 0
end
