--[[
  Adds permits (a release, or addPermits with a delta that may be negative), once per request,
  and wakes as many waiters as the free permits can now serve.

  ioredis resends a command whose reply was lost to a reconnect; without the latch a resent
  release or addPermits would add its permits twice, and more holders than permits could then
  hold at once (the soak found it for releases: scripts/soak/primitives/semaphore.ts). The latch
  keeps the first run's answer for the resend and expires by itself. A call with the caller's
  operationId has the id's latch, so that the caller's retry is answered the same way.

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel "rlock__semaphore:{<key>}"
    KEYS[4] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    KEYS[5] latch of this request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>" (or
            "...:op:<operationId>"): a resend of a call whose reply was lost, or a retry with the
            same operationId, answers what the first run did, adding nothing again
    ARGV[1] permits to add (may be negative)
    ARGV[2] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[3] the releasing client's id (named in the message)
    ARGV[4] latch TTL in ms
    ARGV[5] the call's deadline in Redis ms, 0 for none: a resend later than that is refused (fresh.lua)

  Output:
    {free permits after the change, clients the wake-up message reached (0: none sent)}, and a
    third element 1 when that answer is the first run's, replayed
]]
--@include semaphoreWake.lua
--@include kind.lua
--@include fresh.lua
local done = redis.call('get', KEYS[5])
if done then
  local free, reached = string.match(done, '^(-?%d+):(%d+)$')
  return {tonumber(free), tonumber(reached), 1}
end
assertFresh(ARGV[5])
local free = incrByMarked(KEYS[1], ARGV[1], KEYS[4], 'semaphore')
local reached = 0
if tonumber(ARGV[1]) > 0 then
  reached = wakeWaiters(KEYS[2], KEYS[3], free, ARGV[2], ARGV[3])
elseif tonumber(ARGV[1]) < 0 then
  -- A cut: every client stops handing permits on in-process (they would go on serving the old
  -- total) and gives its releases back here until none are owed (names.ts, PERMITS_CUT_MESSAGE).
  redis.call(ARGV[2], KEYS[3], 'cut')
end
redis.call('set', KEYS[5], free .. ':' .. reached, 'px', ARGV[4])
return {free, reached}
