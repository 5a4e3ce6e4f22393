--[[
  Sets the number of permits, only if it was never set (a counter at 0 is set: all taken).

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    ARGV[1] permits (>= 0)
    ARGV[2] publish command

  Output:
    1 when set, 0 when the semaphore already had permits set.
]]
--@include semaphoreWake.lua
--@include kind.lua
if not setMarkedOnce(KEYS[1], ARGV[1], KEYS[4], 'semaphore') then
  return 0
end
wakeWaiters(KEYS[2], KEYS[3], tonumber(ARGV[1]), ARGV[2], '')
return 1
