--[[
  Counts down by one, once per operation id: a call whose reply was lost and that the client
  sent again (ioredis resends after a reconnect) finds its id recorded and changes nothing. At
  zero deletes the count and wakes every awaiter; the kind marker stays, so that the latch
  reads as open rather than never set.

  Input:
    KEYS[1] the count
    KEYS[2] channel "rlock__latch:{<key>}"
    KEYS[3] the ids of recent count downs, set "rlock__latch_ops:{<key>}" with a TTL
    KEYS[4] the rounds "rlock__latch_rounds:{<key>}": the one that reaches 0 ends the round as "open"
    KEYS[5] the kind marker "rlock__kind:{<key>}": another kind's is refused (kind.lua)
    ARGV[1] publish command: "spublish" on a Cluster with sharded pub/sub, else "publish"
    ARGV[2] this call's operation id
    ARGV[3] how long an id stays recorded, in ms (longer than any resend may take)
    ARGV[4] the call's deadline in Redis ms, 0 for none: a resend later than that whose id is no
            longer recorded is refused (fresh.lua)

  Output:
    the count left (never below 0: a count down on an open latch changes nothing).
]]
--@include latchRounds.lua
--@include kind.lua
--@include fresh.lua
assertKind(KEYS[5], 'latch')
-- Late, it is refused unless its id is recorded (then it changes nothing, below). SISMEMBER only
-- then: an ACL that lacks it fails that rare call, before anything is written.
local late = lateBy(ARGV[4])
if late > 0 and redis.call('sismember', KEYS[3], ARGV[2]) == 0 then
  refuseStale(late)
end
-- Read first: a key of another type fails here (WRONGTYPE) with nothing written.
local count = redis.call('get', KEYS[1])
if count then
  countOf(count, 'latch') -- before the id is recorded: a value no latch wrote is refused whole
end
local rounds = readRounds(KEYS[4])
-- Recorded also when there is nothing to count down: a resend of a call that ran on an open or
-- never-set latch must not count down a round set since.
local first = redis.call('sadd', KEYS[3], ARGV[2]) == 1
if first then
  redis.call('pexpire', KEYS[3], ARGV[3])
end
if not count then
  return 0
end
if not first then
  return tonumber(count)
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
  endRound(KEYS[4], rounds, 'open')
  redis.call(ARGV[1], KEYS[2], 'wake:all')
  return 0
end
return left
