--[[
  A waiter gives up (timeout, abort, close, error): if it held the reservation, it drops it
  and wakes the waiters that the reservation kept back.

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel
    ARGV[1] the waiter's field
    ARGV[2] publish command

  Output:
    1 when the caller's reservation was dropped, 0 when it held none.
]]
--@include semaphoreWake.lua
if redis.call('hget', KEYS[2], 'field') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[2])
wakeWaiters(KEYS[2], KEYS[3], tonumber(redis.call('get', KEYS[1]) or '0'), ARGV[2], '')
return 1
