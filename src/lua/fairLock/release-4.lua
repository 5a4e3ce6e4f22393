--[[
  Gives back one hold of the owner; on the last one hands the lock straight to the first live
  waiter in the queue (or deletes it when nobody waits).

  Input:
    KEYS[1] lock hash key
    KEYS[2] queue (zset, arrival order)
    KEYS[3] queue deadlines (zset, Redis ms)
    KEYS[4] latch key of this release request (see includes/releaseHold.lua)
    ARGV[1] owner field "<clientId>:<ownerId>"
    ARGV[2] latch TTL in ms
    ARGV[3] queue timeout in ms
    ARGV[4] grant channel prefix "rlock__grant:{<lock key>}:"
    ARGV[5] publish command ("publish" or "spublish")
    ARGV[6] "1" when PUBLISH's receiver count can be trusted
    ARGV[7] the releasing client's id: a waiter of this client is granted the lock without a
            message (the caller tells it from the reply)

  Output:
    nil when the owner holds nothing; 0 when holds remain; 1 when the owner's last hold went;
    "<granted owner field>@<µs>" instead of 1 when the lock went to a waiter of the releasing
    client (a resent release answers the same: its latch keeps the answer).
]]
--@include fairQueue.lua
--@include releaseHold.lua
return releaseHold(KEYS[1], KEYS[4], ARGV[1], ARGV[2], function()
  -- Nobody queued (the uncontended case): nothing to hand over, and no need for the clock.
  if redis.call('exists', KEYS[2]) == 0 then
    return nil
  end
  local nowMs, nowUs = clock()
  local _, toldField = grantNext(nowMs, nowUs, nil, tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7])
  return toldField
end)
