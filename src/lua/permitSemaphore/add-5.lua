--[[
  Changes the total of permits by a delta (may be negative) and wakes the waiters new permits
  can serve.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    KEYS[5] latch of this request: a resend of a call whose reply was lost changes nothing again
    ARGV[1] delta
    ARGV[2] publish command
    ARGV[3] latch TTL in ms
    ARGV[4] the call's deadline in Redis ms, 0 for none: a resend later than that is refused (fresh.lua)

  Output:
    the free permits after the change.
]]
--@include permits.lua
--@include kind.lua
--@include fresh.lua
if redis.call('exists', KEYS[5]) == 1 then
  return freePermits(KEYS[1], KEYS[2], nowMs())
end
assertFresh(ARGV[4])
incrByMarked(KEYS[1], ARGV[1], KEYS[4], 'permits')
local free = freePermits(KEYS[1], KEYS[2], nowMs())
if tonumber(ARGV[1]) > 0 and free > 0 then
  redis.call(ARGV[2], KEYS[3], 'wake:' .. free .. ':')
elseif tonumber(ARGV[1]) < 0 then
  -- A cut: clients stop pipelining their in-process handoffs, which handoff-3.lua may now
  -- refuse (names.ts, PERMITS_CUT_MESSAGE).
  redis.call(ARGV[2], KEYS[3], 'cut')
end
redis.call('set', KEYS[5], 1, 'px', ARGV[3])
return free
