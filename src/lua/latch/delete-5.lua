--[[
  Deletes the latch: its count goes, the marker says "deleted" for a while, and every awaiter is
  woken to read it and reject (instead of taking the missing count for an opened latch); once per
  request: a resend after a lost reply answers what the first run did, and does not delete a
  latch set again since.

  Input:
    KEYS[1] the count
    KEYS[2] the kind marker "rlock__kind:{<key>}" (see kind.lua)
    KEYS[3] channel "rlock__latch:{<key>}"
    KEYS[4] latch of this request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>"
    KEYS[5] the rounds "rlock__latch_rounds:{<key>}": a round still counting ends as "deleted"
            (one that opened stays opened for its awaiters); they go with the marker
    ARGV[1] publish command
    ARGV[2] how long the "deleted" marker stays, in ms (the awaiters woken read it well before)
    ARGV[3] latch TTL in ms
    ARGV[4] the call's deadline in Redis ms, 0 for none: a resend later than that is refused (fresh.lua)

  Output:
    1 when there was a latch (set or open), 0 when there was none (never set, or deleted already).
]]
--@include once.lua
--@include latchRounds.lua
local rounds = readRounds(KEYS[5])
--@include kind.lua
--@include fresh.lua
return once(KEYS[4], ARGV[3], function()
  -- A resend later than the latch lasts would delete a latch set again since.
  assertFresh(ARGV[4])
  -- Another kind's count, or a lock's hash: refused, or the DEL below freed a held lock or
  -- another primitive's count.
  assertKind(KEYS[2], 'latch')
  assertCount(KEYS[1], 'latch')
  local counted = redis.call('del', KEYS[1])
  if counted == 0 and redis.call('get', KEYS[2]) ~= 'latch' then
    return 0
  end
  if counted == 1 then
    endRound(KEYS[5], rounds, 'deleted')
  elseif rounds.live then
    -- Opened without a record (a client without rounds counted it down): opened it is.
    endRound(KEYS[5], rounds, 'open')
  end
  redis.call('pexpire', KEYS[5], ARGV[2])
  redis.call('set', KEYS[2], 'deleted', 'PX', ARGV[2])
  redis.call(ARGV[1], KEYS[3], 'wake:all')
  return 1
end)
