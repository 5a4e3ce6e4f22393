--[[
  Takes every free permit, once per request: a resend of a call whose reply was lost (ioredis,
  after a reconnect) answers what the first run took instead of taking nothing, so the permits
  it took are not lost to a caller told 0.

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] latch of this request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>"
    KEYS[3] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)
    ARGV[1] latch TTL in ms
    ARGV[2] the call's deadline in Redis ms, 0 for none: a resend later than that is refused (fresh.lua)

  Output:
    how many were taken (0 when none were free; a negative count is left as it is).
]]
--@include once.lua
--@include kind.lua
--@include fresh.lua
return once(KEYS[2], ARGV[1], function()
  assertFresh(ARGV[2])
  assertKind(KEYS[3], 'semaphore')
  local free = countOf(redis.call('get', KEYS[1]) or '0', 'semaphore')
  if free <= 0 then
    return 0
  end
  redis.call('decrby', KEYS[1], free)
  return free
end)
