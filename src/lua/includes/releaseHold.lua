-- Gives back one hold of `field` on the lock hash `lockKey`; on the last one deletes the lock
-- and calls `freed()` (which wakes waiters or hands the lock on). Answers nil when the owner
-- holds nothing, 0 when holds remain, otherwise what `freed()` answers, or 1.
--
-- Every release that gave a hold back writes its answer to the latch of its request, so that a
-- resent one (ioredis resends a command whose reply was lost to a reconnect) answers what the
-- first run did instead of decrementing twice (Redisson #4871, #6651). The full release needs
-- it too: without it the resend of a release that worked finds the owner's field gone and
-- answers nil, the same answer as a hold that a force-unlock, an expiry or a restart took away
-- before the release ran, and that owner would never be told. So nil means "taken away".
-- A partial release's latch is deleted by the client once the reply is in; a full release's
-- is left to expire (its TTL), which saves a command on every common unlock.
--
-- releaseOwnHold is the general form: on the owner's last hold it calls `lastHold()` instead,
-- which decides what is left of the lock (a read-write lock keeps its other holders).
local function releaseOwnHold(lockKey, latchKey, field, latchTtl, lastHold)
  local done = redis.call('get', latchKey)
  if done then
    return tonumber(done) or done
  end
  if redis.call('hexists', lockKey, field) == 0 then
    return nil
  end
  local result = 0
  if redis.call('hincrby', lockKey, field, -1) <= 0 then
    result = lastHold() or 1
  end
  redis.call('set', latchKey, result, 'px', latchTtl)
  return result
end

local function releaseHold(lockKey, latchKey, field, latchTtl, freed)
  return releaseOwnHold(lockKey, latchKey, field, latchTtl, function()
    redis.call('del', lockKey)
    return freed()
  end)
end
