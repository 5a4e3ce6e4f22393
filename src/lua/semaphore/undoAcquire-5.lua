--[[
  Undoes one acquire attempt whose outcome its caller never learned (ioredis gave up on the
  call: its commandTimeout, a connection flushed): in whatever order Redis runs the two.

  A plain semaphore's permits have no owner and no lease: permits an attempt took for a caller
  that was told nothing are lost for good. The attempt's latch says whether it ran:
  - "1": it took its permits; they go back (and wake waiters, as a release does);
  - missing: it has not run (yet). A tombstone is left in its place, and the attempt, should it
    still reach Redis (it waited in a paused server's input), finds the latch and takes nothing.
    The attempt carries a deadline just short of its latch's life (fresh.lua), so it cannot
    come after the tombstone is gone;
  - "undone": this undo ran already (a resend, a retry): nothing more.

  Input:
    KEYS[1] the counter of free permits
    KEYS[2] the reservation hash
    KEYS[3] the semaphore's channel
    KEYS[4] the kind marker (see kind.lua)
    KEYS[5] the attempt's latch (see acquire-4.lua)
    ARGV[1] the permits the attempt asked for
    ARGV[2] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[3] the client's id (named in the wake-up message)
    ARGV[4] latch TTL in ms

  Output: 1 when permits went back, 0 otherwise
]]
--@include semaphoreWake.lua
--@include kind.lua
local done = redis.call('get', KEYS[5])
if done == 'undone' then
  return 0
end
redis.call('set', KEYS[5], 'undone', 'px', ARGV[4])
if not done then
  return 0
end
local free = incrByMarked(KEYS[1], ARGV[1], KEYS[4], 'semaphore')
wakeWaiters(KEYS[2], KEYS[3], free, ARGV[2], ARGV[3])
return 1
