-- A semaphore's, a permit-expirable semaphore's and a latch's main key is a bare integer: only
-- this marker beside it ("semaphore", "permits" or "latch", in the key's slot) lets `rlock list`
-- and `rlock inspect` tell which one it is. Written where the main key is created, deleted
-- with it.
--
-- The marker also keeps the kinds apart: a name used by mistake as two of them (a semaphore's
-- name taken for a latch, a plain semaphore's for a permit-expirable one) would otherwise have
-- each count on the other's integer: permits over-admitted, a latch opened early. A script that
-- writes or decides on the integer first refuses (WRONGTYPE, nothing written) a marker of
-- another kind. "deleted" (a latch deleted a moment ago) belongs to nobody.
local KIND_NAMES = { semaphore = 'a semaphore', permits = 'a permit-expirable semaphore', latch = 'a count-down latch' }

-- Refuses a marker of another kind than `kind`.
local function assertMarker(marker, kind)
  if marker and marker ~= kind and marker ~= 'deleted' then
    error({ err = 'WRONGTYPE the name is used by ' .. (KIND_NAMES[marker] or marker) .. ', not ' .. KIND_NAMES[kind] })
  end
end

-- Refuses a name another kind marked; answers the marker (false when there is none).
local function assertKind(kindKey, kind)
  local marker = redis.call('get', kindKey)
  assertMarker(marker, kind)
  return marker
end

-- Refuses a `key` that is no count: a lock's hash (it has no marker), or a key of another type.
local function assertCount(key, kind)
  local value = redis.pcall('get', key)
  if type(value) == 'table' and value.err then
    error({ err = 'WRONGTYPE the name is used by a lock (or a key of another type), not ' .. KIND_NAMES[kind] })
  end
end

-- The number `value` holds; a value no counter wrote (a string someone SET, with no marker) is
-- refused before anything is written (read as a count it was NaN, or a Lua error).
local function countOf(value, kind)
  local count = tonumber(value)
  if not count then
    error({ err = 'WRONGTYPE the name holds a value that is not a count, not ' .. KIND_NAMES[kind] })
  end
  return count
end

local function markKind(kindKey, kind)
  redis.call('set', kindKey, kind)
end

-- Sets `key` to `value` and marks it as a `kind`, only if it has no value yet; true when set.
local function setMarkedOnce(key, value, kindKey, kind)
  assertKind(kindKey, kind)
  if redis.call('exists', key) == 1 then
    -- A lock's hash (no marker) answered "already set": refused as a kind of its own instead.
    assertCount(key, kind)
    return false
  end
  redis.call('set', key, value)
  markKind(kindKey, kind)
  return true
end

-- Adds `delta` to the integer at `key` and answers the new value; a key this creates is marked
-- as a `kind` (a count that existed already was marked when it was created).
local function incrByMarked(key, delta, kindKey, kind)
  assertKind(kindKey, kind)
  if redis.call('exists', key) == 0 then
    markKind(kindKey, kind)
  end
  local count = redis.pcall('incrby', key, delta)
  if type(count) == 'table' and count.err then
    countOf(redis.call('get', key), kind) -- not a count: refused as such; another error as it is
    error(count)
  end
  return count
end
