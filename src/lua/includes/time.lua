-- Redis's clock in ms (TIME): leases and deadlines come from it, never from a client's clock.
local function nowMs()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
