--[[
  Sets the number of permits, only if it was never set (a counter at 0 is set: all taken).

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    KEYS[5] latch of this request (once.lua): a resend answers what the first run did
    ARGV[1] permits (>= 0)
    ARGV[2] publish command
    ARGV[3] latch TTL in ms

  Output:
    1 when set, 0 when the semaphore already had permits set.
]]
--@include semaphoreWake.lua
--@include kind.lua
--@include once.lua
return once(KEYS[5], ARGV[3], function()
  if not setMarkedOnce(KEYS[1], ARGV[1], KEYS[4], 'semaphore') then
    return 0
  end
  wakeWaiters(KEYS[2], KEYS[3], tonumber(ARGV[1]), ARGV[2], '')
  return 1
end)
