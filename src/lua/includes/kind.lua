-- A semaphore's, a permit-expirable semaphore's and a latch's main key is a bare integer: only
-- this marker beside it ("semaphore", "permits" or "latch", in the key's slot) lets `rlock list`
-- and `rlock inspect` tell which one it is. Written where the main key is created, deleted
-- with it.
local function markKind(kindKey, kind)
  redis.call('set', kindKey, kind)
end

-- Sets `key` to `value` and marks it as a `kind`, only if it has no value yet; true when set.
local function setMarkedOnce(key, value, kindKey, kind)
  if redis.call('exists', key) == 1 then
    return false
  end
  redis.call('set', key, value)
  markKind(kindKey, kind)
  return true
end

-- Adds `delta` to the integer at `key` and answers the new value; a key this creates is marked
-- as a `kind` (a count that existed already was marked when it was created).
local function incrByMarked(key, delta, kindKey, kind)
  if redis.call('exists', key) == 0 then
    markKind(kindKey, kind)
  end
  return redis.call('incrby', key, delta)
end
