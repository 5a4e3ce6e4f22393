--[[
  Sets the latch's count, only if none is set (a latch that opened, or was deleted, has none:
  it can be set again); once per request: a resend after a lost reply answers what the first run
  did (it answered false for the count it set itself, and, the round over meanwhile, armed another
  round that later awaiters waited on for good).

  Input:
    KEYS[1] the count (a string; missing: unset, open or deleted, as the marker tells)
    KEYS[2] the kind marker "rlock__kind:{<key>}" (see kind.lua): "latch" once set, "deleted"
            for a while after delete()
    KEYS[3] latch of this request "rlock__unlock_latch:{<key>}:<clientId>:<requestId>"
    KEYS[4] the rounds "rlock__latch_rounds:{<key>}" (see latchRounds.lua): a count set starts one
    ARGV[1] count (>= 1)
    ARGV[2] latch TTL in ms

  Output:
    1 when set, 0 when a count was set already.
]]
--@include kind.lua
--@include once.lua
--@include latchRounds.lua
local rounds = readRounds(KEYS[4])
-- What a latest round that lost its count without a record reads as (see startRound).
local vanished = redis.call('get', KEYS[2]) == 'deleted' and 'deleted' or 'open'
return once(KEYS[3], ARGV[2], function()
  if not setMarkedOnce(KEYS[1], ARGV[1], KEYS[2], 'latch') then
    return 0
  end
  startRound(KEYS[4], rounds, vanished)
  return 1
end)
