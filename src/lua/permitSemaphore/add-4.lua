--[[
  Changes the total of permits by a delta (may be negative) and wakes the waiters new permits
  can serve.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    ARGV[1] delta
    ARGV[2] publish command

  Output:
    the free permits after the change.
]]
--@include permits.lua
--@include kind.lua
incrByMarked(KEYS[1], ARGV[1], KEYS[4], 'permits')
local free = freePermits(KEYS[1], KEYS[2], nowMs())
if tonumber(ARGV[1]) > 0 and free > 0 then
  redis.call(ARGV[2], KEYS[3], 'wake:' .. free .. ':')
end
return free
