-- A permit-expirable semaphore: a total of permits (a string) and a zset of the permits taken,
-- permit id -> expiry in Redis ms. A permit whose expiry has passed counts as free at once,
-- whoever looks (leases run on the Redis server's clock, never a client's); scripts that write
-- also sweep them.
--@include time.lua
--@include kind.lua

-- The total (a number), false when never set. A value no semaphore wrote (no marker either) is
-- refused (countOf): read as a total it was NaN.
local function readTotal(totalKey)
  local total = redis.call('get', totalKey)
  return total and countOf(total, 'permits')
end

-- Free permits at `now`: the total minus the permits still on lease; false when never set.
local function freePermits(totalKey, permitsKey, now)
  local total = readTotal(totalKey)
  if not total then
    return false
  end
  return total - redis.call('zcount', permitsKey, '(' .. now, '+inf')
end

-- Extends a permit still on lease to `now + lease`; false when it is unknown or has expired.
local function extendPermit(permitsKey, id, now, lease)
  local expiry = redis.call('zscore', permitsKey, id)
  if not expiry or tonumber(expiry) <= now then
    return false
  end
  redis.call('zadd', permitsKey, 'XX', now + lease, id)
  return true
end
