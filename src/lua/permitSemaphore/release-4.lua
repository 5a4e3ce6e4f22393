--[[
  Gives a permit back and wakes as many waiters as permits are now free. A release that gave
  one back leaves its answer in the latch of its request, so that a release ioredis resends
  after a reconnect answers "released" instead of "not held", and "not held" always means the
  permit was taken away (its lease ran out, Redis lost it) before the release ran.

  Input:
    KEYS[1] total permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] channel
    KEYS[4] latch of this release request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>"
    ARGV[1] permit id
    ARGV[2] publish command
    ARGV[3] the releasing client's id (named in the message)
    ARGV[4] latch TTL in ms (it expires by itself)

  Output:
    {1, clients the wake-up message reached} when released; {0, 0} when the permit was not held
    (unknown, released, or its lease had run out: it was free already, and is not counted twice).
]]
--@include permits.lua
local done = redis.call('get', KEYS[4])
if done then
  return {1, tonumber(done)}
end
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
redis.call('set', KEYS[4], reached, 'px', ARGV[4])
return {1, reached}
