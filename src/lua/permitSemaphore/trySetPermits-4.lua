--[[
  Sets the total of permits, only if it was never set.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken (unused; named so that Cluster checks the slot)
    KEYS[3] channel
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    ARGV[1] total (>= 0)
    ARGV[2] publish command

  Output:
    1 when set, 0 when a total was set already.
]]
--@include kind.lua
if not setMarkedOnce(KEYS[1], ARGV[1], KEYS[4], 'permits') then
  return 0
end
if tonumber(ARGV[1]) > 0 then
  redis.call(ARGV[2], KEYS[3], 'wake:' .. ARGV[1] .. ':')
end
return 1
