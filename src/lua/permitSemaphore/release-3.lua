--[[
  Gives a permit back and wakes as many waiters as permits are now free.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel
    ARGV[1] permit id
    ARGV[2] publish command
    ARGV[3] the releasing client's id (named in the message)

  Output:
    {1, clients the wake-up message reached} when released; {0, 0} when the permit was not held
    (unknown, released, or its lease had run out: it was free already, and is not counted twice).
]]
--@include permits.lua
local now = nowMs()
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if not expiry then
  return {0, 0}
end
redis.call('zrem', KEYS[2], ARGV[1])
if tonumber(expiry) <= now then
  return {0, 0}
end
local free = freePermits(KEYS[1], KEYS[2], now)
local reached = 0
if free and free > 0 then
  reached = redis.call(ARGV[2], KEYS[3], 'wake:' .. free .. ':' .. ARGV[3])
end
return {1, reached}
