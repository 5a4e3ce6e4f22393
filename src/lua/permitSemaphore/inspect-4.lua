--[[
  Read-only: the total and the permits still on lease, with the Redis clock they run on, and
  the claim on the next free permit.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] the claim (see acquire-5.lua)
    KEYS[4] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)

  Output:
    {total or false, now (Redis ms), {id1, expiry1, id2, expiry2, ...} (live permits, soonest
    first), the claiming clientId or false, the claim's PTTL}
]]
--@include permits.lua
--@include kind.lua
assertKind(KEYS[4], 'permits')
local now = nowMs()
return {
  readTotal(KEYS[1]),
  now,
  redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'WITHSCORES'),
  redis.call('get', KEYS[3]),
  redis.call('pttl', KEYS[3]),
}
