--[[
  Free permits now, counting the permits whose lease ran out as free (read-only).

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)

  Output:
    the free permits (0 when the total was never set; negative after a negative addPermits).
]]
--@include permits.lua
return freePermits(KEYS[1], KEYS[2], nowMs()) or 0
