--[[
  Free permits now, counting the permits whose lease ran out as free (read-only).

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)

  Output:
    the free permits (0 when the total was never set; negative after a negative addPermits).
]]
--@include permits.lua
--@include kind.lua
assertKind(KEYS[3], 'permits')
return freePermits(KEYS[1], KEYS[2], nowMs()) or 0
