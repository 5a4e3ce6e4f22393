--[[
  The watchdog's batch for permits taken without a lease: extends each that is still held.

  Input:
    KEYS[1..n]   permits zsets (all in one hash slot on Cluster)
    ARGV[1]      lease in ms
    ARGV[2..n+1] permit id of each key, in the same order

  Output:
    an array of n integers: 1 where the lease was extended, 0 where the permit is no longer
    held (released, expired, or Redis lost it).
]]
--@include permits.lua
local now = nowMs()
local renewed = {}
for i = 1, #KEYS do
  renewed[i] = extendPermit(KEYS[i], ARGV[i + 1], now, tonumber(ARGV[1])) and 1 or 0
end
return renewed
