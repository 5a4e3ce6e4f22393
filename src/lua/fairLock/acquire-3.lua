--[[
  Takes the fair lock for an owner when it is free and nobody queued before it, enters it again
  when the owner holds it, or (enqueue = 1) puts the owner at the back of the queue.

  Input:
    KEYS[1] lock hash key
    KEYS[2] queue (zset, arrival order)
    KEYS[3] queue deadlines (zset, Redis ms)
    ARGV[1] member "<leaseMs>:<clientId>:<ownerId>"
    ARGV[2] "1" to join (or stay in) the queue when the lock is not free for us, "0" to only try
    ARGV[3] "1" when the owner already holds the lock (re-entry) and no attempt of this wait has
            found it not holding; "0" otherwise: then a field of its own in the hash is a grant
            made while it waited, taken as is (one hold)
    ARGV[4] queue timeout in ms: an entry not refreshed for this long is dead
    ARGV[5] grant channel prefix "rlock__grant:{<lock key>}:" (the clientId is appended)
    ARGV[6] publish command ("publish" or "spublish")
    ARGV[7] "1" when PUBLISH's receiver count can be trusted (see grantNext)

  Output:
    nil when the owner holds the lock now; 0 when it holds it now but took it afresh although
    ARGV[3] said it held it (its hold was lost, and the lock was free: its scope must be told);
    otherwise {the lock's PTTL in ms (-1: no TTL), Redis time in µs}: the owner was not granted
    the lock as of then, so a grant stamped earlier that reaches it afterwards is stale (see
    grantNext).
]]
--@include fairQueue.lua
--@include lease.lua
local member = ARGV[1]
local lease, field = string.match(member, '^(%d+):(.*)$')
local queueTimeout = tonumber(ARGV[4])

if redis.call('hexists', KEYS[1], field) == 1 then
  if ARGV[3] == '1' then
    redis.call('hincrby', KEYS[1], field, 1)
  end
  -- A grant's first lease (at most the queue timeout) becomes the full lease; a re-entry's only lengthens it.
  lengthenLease(KEYS[1], lease)
  removeEntry(member)
  return nil
end

local ttl = redis.call('pttl', KEYS[1])
local nowMs, nowUs
if ttl == -2 then
  -- An empty queue (the uncontended case) has nobody to serve first and nothing to purge.
  local granted = false
  if redis.call('exists', KEYS[2]) == 1 then
    nowMs, nowUs = clock()
    granted = grantNext(nowMs, nowUs, member, queueTimeout, ARGV[5], ARGV[6], ARGV[7])
  end
  if not granted or granted == member then
    redis.call('hset', KEYS[1], field, 1)
    redis.call('pexpire', KEYS[1], lease)
    if ARGV[3] == '1' then
      return 0
    end
    return nil
  end
  ttl = redis.call('pttl', KEYS[1])
end

if not nowMs then
  nowMs, nowUs = clock()
end
if ARGV[2] == '1' then
  enqueue(member, nowMs, queueTimeout)
end
return {ttl, nowUs}
