-- A queue in Redis with deadlines, shared by the fair lock (one entry per waiter) and the plain
-- lock (one entry per waiting client); pulled in with --@include.
--   KEYS[2] the queue: zset member -> arrival order
--   KEYS[3] the deadlines: zset member -> Redis time (ms) after which the entry is dead
-- Deadlines come from Redis's clock (TIME), never a client's, so a client whose clock runs fast
-- cannot evict live waiters (Redisson's queue can).

--@include time.lua

-- Entries whose clients stopped refreshing them (a stopped or dead process) go all at once, so
-- k dead waiters cost one queue timeout together, not one each (Redisson #1353).
local function purgeExpired(now)
  local dead = redis.call('zrangebyscore', KEYS[3], '-inf', now)
  for i = 1, #dead do
    redis.call('zrem', KEYS[2], dead[i])
  end
  if #dead > 0 then
    redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  end
end

local function removeEntry(member)
  redis.call('zrem', KEYS[2], member)
  redis.call('zrem', KEYS[3], member)
end

-- Takes the first entry out of the queue; nil when it is empty (an iterator: `for head in popHead do`).
local function popHead()
  local head = redis.call('zrange', KEYS[2], 0, 0)[1]
  if head then
    removeEntry(head)
  end
  return head
end

-- The queue keys outlive their last refresh by one timeout: by then every entry in them is dead.
-- Never shortened: clients with different queue timeouts share a queue, and one with a short
-- timeout cut the keys under the others' live entries (gone with them: a release then woke
-- nobody, and the waiters slept until their heartbeat).
local function keepQueueKeys(queueKey, expiryKey, queueTimeout)
  if redis.call('pttl', queueKey) < queueTimeout then
    redis.call('pexpire', queueKey, queueTimeout)
  end
  if redis.call('pttl', expiryKey) < queueTimeout then
    redis.call('pexpire', expiryKey, queueTimeout)
  end
end

local function touchQueue(queueTimeout)
  keepQueueKeys(KEYS[2], KEYS[3], queueTimeout)
end

-- Puts `member` at the back of the queue unless it is in it already (then it keeps its place),
-- and gives it a full `queueTimeout` to live.
local function enqueue(member, now, queueTimeout)
  if not redis.call('zscore', KEYS[3], member) then
    local last = redis.call('zrange', KEYS[2], -1, -1, 'withscores')
    redis.call('zadd', KEYS[2], last[2] and tonumber(last[2]) + 1 or 1, member)
  end
  redis.call('zadd', KEYS[3], now + queueTimeout, member)
  touchQueue(queueTimeout)
end
