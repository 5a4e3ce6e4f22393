--[[
  Takes every free permit.

  Input:
    KEYS[1] the counter of free permits

  Output:
    how many were taken (0 when none were free; a negative count is left as it is).
]]
local free = tonumber(redis.call('get', KEYS[1]) or '0')
if free <= 0 then
  return 0
end
redis.call('decrby', KEYS[1], free)
return free
