--[[
  Sets a held permit's lease to `lease` ms from now (Redis time).

  Input:
    KEYS[1] permits taken, zset permit id -> expiry (Redis ms)
    ARGV[1] permit id
    ARGV[2] lease in ms

  Output:
    1 when updated; 0 when the permit is not held (unknown, released, or expired).
]]
--@include permits.lua
return extendPermit(KEYS[1], ARGV[1], nowMs(), tonumber(ARGV[2])) and 1 or 0
