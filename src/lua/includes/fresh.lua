--@include time.lua
-- A counting call carries a deadline in Redis's time (ms; 0: none), just short of when its latch
-- expires (src/services/RedisClock.ts): ioredis resends a call whose connection dropped before
-- the reply, and one that reaches Redis after its latch expired would count a second time (its
-- first run's answer is gone). Checked once the latch said the call has not run here; refused, it
-- writes nothing.

-- How many ms past its deadline the call is (0 or less: in time, or it has none).
local function lateBy(notAfter)
  local deadline = tonumber(notAfter) or 0
  if deadline == 0 then
    return 0
  end
  return nowMs() - deadline
end

local function refuseStale(late)
  error({ err = 'STALE the call reached Redis ' .. late .. ' ms past its deadline (resent after an outage longer than its latch lasts): not run again; whether an earlier run of it counted is unknown' })
end

local function assertFresh(notAfter)
  local late = lateBy(notAfter)
  if late > 0 then
    refuseStale(late)
  end
end
