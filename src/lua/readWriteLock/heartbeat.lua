--[[
  The waiting writers' heartbeat (the client's QueueHeartbeat): one call per client, slot and
  period refreshes the entry of every writer its parked waiters have, so that only the entries
  of stopped or dead processes run out and let new readers in again. An entry a write release
  cleared (the readers' turn) is not brought back: its writer registers again when it next tries.

  Input:
    KEYS[3i-2], KEYS[3i-1], KEYS[3i]  lock hash, waiting writers (zset) and leases (zset) of
                                      entry i (all in one slot on Cluster)
    ARGV[1]                           entry lifetime in ms (the queue timeout)
    ARGV[i+1]                         writer field of entry i

  Output:
    an array with, per entry, 1 while the lock is held (wait on), 0 when it is free: a release
    whose message was lost, or holds that ran out; the writer then tries at once.
]]
--@include readWriteLock.lua
local deadline = nowMs() + tonumber(ARGV[1])
local held = {}
for i = 1, #KEYS / 3 do
  local lock, writers, member = KEYS[3 * i - 2], KEYS[3 * i - 1], ARGV[i + 1]
  if redis.call('zscore', writers, member) then
    redis.call('zadd', writers, deadline, member)
    expireWithLastWriter(writers)
  end
  held[i] = redis.call('exists', lock)
end
return held
