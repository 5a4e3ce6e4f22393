--[[
  Takes one permit with a lease if one is free (a permit whose lease ran out is free again).
  A client whose waiter has waited long (the caller decides: ARGV[5]) claims the next free
  permit for its own waiters (KEYS[4], its clientId, for ARGV[6] ms, renewed by each such
  attempt): while the claim stands, others take a permit only when one more stays free for
  the claimant. Without it the client whose waiters are woken last (farther from Redis; the
  last subscriber of several clients in one process) lost every race to the others.

  Input:
    KEYS[1] total permits (a string; missing: never set)
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel "rlock__permits_channel:{<key>}"
    KEYS[4] the claim: the clientId the next free permit is kept for
    KEYS[5] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)
    ARGV[1] the new permit's id
    ARGV[2] lease in ms
    ARGV[3] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[4] the caller's clientId
    ARGV[5] "1" when a refused caller claims (or renews its client's claim), else "0"
    ARGV[6] how long a claim stands without renewal, in ms

  Output:
    nil when taken; else how long to sleep at most: the ms until the first lease runs out (that
    permit comes back then, without a message) or until another client's claim ends, whichever
    is sooner; -1 when there is no such bound (a release or a new total will say).
]]
--@include permits.lua
--@include kind.lua
assertKind(KEYS[5], 'permits')
local now = nowMs()
-- A resend (ioredis, after a reconnect) of a call whose first run took the permit: taken. The
-- id is new for each acquire, so only that first run can have put it there.
local taken = redis.call('zscore', KEYS[2], ARGV[1])
if taken and tonumber(taken) > now then
  return nil
end
local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
local free = freePermits(KEYS[1], KEYS[2], now)
local claim = redis.call('get', KEYS[4])
local mine = claim == ARGV[4]
local keptBack = (claim and not mine) and 1 or 0
if free and free - keptBack >= 1 then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
  if mine then
    redis.call('del', KEYS[4])
  end
  -- Expired permits nobody announced: the others this call found free wake as many waiters.
  if expired > 0 and free > 1 then
    redis.call(ARGV[3], KEYS[3], 'wake:' .. (free - 1) .. ':')
  end
  return nil
end
if free and ARGV[5] == '1' and (mine or not claim) then
  redis.call('set', KEYS[4], ARGV[4], 'px', ARGV[6])
  mine = true
end
local bound = -1
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
  bound = tonumber(first[2]) - now
end
if claim and not mine then
  local left = redis.call('pttl', KEYS[4])
  if left > 0 and (bound < 0 or left < bound) then
    bound = left
  end
end
return bound
