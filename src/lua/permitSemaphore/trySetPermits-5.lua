--[[
  Sets the total of permits, only if it was never set.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken (unused; named so that Cluster checks the slot)
    KEYS[3] channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    KEYS[5] latch of this request (once.lua): a resend answers what the first run did
    ARGV[1] total (>= 0)
    ARGV[2] publish command
    ARGV[3] latch TTL in ms

  Output:
    1 when set, 0 when a total was set already.
]]
--@include kind.lua
--@include once.lua
return once(KEYS[5], ARGV[3], function()
  if not setMarkedOnce(KEYS[1], ARGV[1], KEYS[4], 'permits') then
    return 0
  end
  if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[3], 'wake:' .. ARGV[1] .. ':')
  end
  return 1
end)
