-- A read-write lock's state, shared by its scripts (pulled in with --@include):
--   lock    hash: 'mode' -> 'read' | 'write'; '<clientId>:<ownerId>' -> the owner's read holds;
--           '<clientId>:<ownerId>:write' -> its write holds
--   leases  zset: holder field (as in the hash) -> Redis time (ms) its lease ends
--   writers zset: waiting writer field -> Redis time (ms) its entry ends unless refreshed
-- Each holder has a lease of its own; both keys live until the longest one ends (PEXPIREAT), so
-- they vanish by themselves when every holder is gone. A holder whose lease ended before that is
-- dropped by the next script that touches the lock (purgeLeases), so no call ever counts it.
--@include time.lua

local WRITE_SUFFIX = ':write'

local function isWriteField(field)
  return string.sub(field, -#WRITE_SUFFIX) == WRITE_SUFFIX
end

local function expireWithLongestLease(lock, leases)
  local last = redis.call('zrange', leases, -1, -1, 'withscores')
  if last[2] then
    redis.call('pexpireat', lock, last[2])
    redis.call('pexpireat', leases, last[2])
  else
    redis.call('del', lock, leases)
  end
end

-- Drops the holders whose lease ended; a writer gone that leaves its own reads (a downgrade)
-- leaves the lock in read mode.
local function purgeLeases(lock, leases, now)
  local dead = redis.call('zrangebyscore', leases, '-inf', now)
  if #dead == 0 then
    return
  end
  redis.call('zremrangebyscore', leases, '-inf', now)
  local writerGone = false
  for i = 1, #dead do
    redis.call('hdel', lock, dead[i])
    writerGone = writerGone or isWriteField(dead[i])
  end
  if redis.call('zcard', leases) == 0 then
    redis.call('del', lock, leases)
  elseif writerGone then
    redis.call('hset', lock, 'mode', 'read')
  end
end

-- One more hold of `field`; its lease runs at least `lease` ms from now (never shortened: a
-- short re-entry must not cut a long hold, Redisson #2144).
local function takeHold(lock, leases, field, now, lease)
  redis.call('hincrby', lock, field, 1)
  local deadline = now + lease
  local current = redis.call('zscore', leases, field)
  if not current or tonumber(current) < deadline then
    redis.call('zadd', leases, deadline, field)
  end
  expireWithLongestLease(lock, leases)
end

-- The client of a holder or writer field "<clientId>:<ownerId>[:write]".
local function clientOfField(field)
  return string.match(field, '^([^:]*):')
end

-- The waiting writers' key lives as long as its longest-lived entry: a client with a short queue
-- timeout must not cut short the entries of one with a longer one (readers would get past their
-- writers once the key went).
local function expireWithLastWriter(writers)
  local last = redis.call('zrange', writers, -1, -1, 'withscores')
  if last[2] then
    redis.call('pexpireat', writers, last[2])
  end
end

-- Whether a live waiting writer of a client other than `client` is in `writers`.
local function otherClientsWriting(writers, now, client)
  local waiting = redis.call('zrangebyscore', writers, now, '+inf')
  for i = 1, #waiting do
    if clientOfField(waiting[i]) ~= client then
      return true
    end
  end
  return false
end

-- Whether a live waiting writer of `client` is in `writers`.
local function clientWriting(writers, now, client)
  local waiting = redis.call('zrangebyscore', writers, now, '+inf')
  for i = 1, #waiting do
    if clientOfField(waiting[i]) == client then
      return true
    end
  end
  return false
end

-- Whether a writer waits; entries their writers stopped refreshing (gone, stopped) are dropped.
local function writersWaiting(writers, now)
  redis.call('zremrangebyscore', writers, '-inf', now)
  return redis.call('zcard', writers) > 0
end
