--[[
  Takes `permits` permits at once if enough are free and no reservation of another waiter
  needs them; a waiter that is subscribed and asks for more than one permit may claim the
  reservation when none is held, so that smaller requests stop overtaking it.

  An attempt that took permits leaves a latch (its own name, expiring by itself): ioredis
  resends a command whose reply was lost to a reconnect, and the resend must answer "taken"
  instead of taking the permits a second time (they would be lost: nobody gives them back).

  Input:
    KEYS[1] the semaphore's counter of free permits (a string; missing: never set, 0 free)
    KEYS[2] its reservation, hash { field, permits } with a TTL
    KEYS[3] latch of this attempt "rlock__unlock_latch:{<key>}:<clientId>:<waiterId>.<attempt>"
    KEYS[4] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)
    ARGV[1] permits asked for (>= 1)
    ARGV[2] the waiter's field "<clientId>:<waiterId>"
    ARGV[3] "1" when the waiter may claim the reservation (subscribed, more than one permit)
    ARGV[4] reservation TTL in ms (renewed by the holder's every attempt)
    ARGV[5] latch TTL in ms
    ARGV[6] the call's deadline in Redis ms, 0 for none (fresh.lua): an attempt that reaches
            Redis later is refused, so that one ioredis gave up on cannot run after the
            tombstone its undo left (undoAcquire-5.lua) is gone

  Output:
    {1, ttl, left} taken, where ttl is the ms until another waiter's reservation that keeps
    permits back runs out (-1: none) and left how many permits stay free for others (a resend
    that finds its latch answers {1, 0}, and so does an attempt whose undo ran first: its
    caller is gone); {2, 0, free} refused, the caller holds the reservation;
    {0, ttl, free} refused, where ttl is the ms until another waiter's reservation that blocked
    it runs out, or -1 (no bound: a release will say when to try again), and free the counter
    (below 0: permits are owed after a cut, and the caller's client must stop handing permits on
    in-process).
]]
--@include kind.lua
--@include fresh.lua
assertKind(KEYS[4], 'semaphore')
if redis.call('exists', KEYS[3]) == 1 then
  return {1, 0}
end
assertFresh(ARGV[6])
local permits = tonumber(ARGV[1])
local free = countOf(redis.call('get', KEYS[1]) or '0', 'semaphore')
local holder = redis.call('hget', KEYS[2], 'field')
local mine = holder == ARGV[2]
local reserved = 0
if holder and not mine then
  reserved = tonumber(redis.call('hget', KEYS[2], 'permits'))
end
if free - reserved >= permits then
  redis.call('decrby', KEYS[1], permits)
  if mine then
    redis.call('del', KEYS[2])
  end
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return {1, holder and not mine and redis.call('pttl', KEYS[2]) or -1, free - reserved - permits}
end
if mine or (not holder and ARGV[3] == '1') then
  redis.call('hset', KEYS[2], 'field', ARGV[2], 'permits', permits)
  redis.call('pexpire', KEYS[2], ARGV[4])
  return {2, 0, free}
end
if holder then
  return {0, redis.call('pttl', KEYS[2]), free}
end
return {0, -1, free}
