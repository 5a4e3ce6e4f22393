--[[
  Hands a held permit to a waiter of the releasing client: the permit leaves under its id and
  comes back under the waiter's, with the waiter's lease, without ever being free (no message,
  no attempt; see PermitExpirableSemaphore.tryRelease). A handoff leaves a latch as a release
  does (release-4.lua), so that a resend answers "handed over".

  Input:
    KEYS[1] the total of permits
    KEYS[2] permits taken, zset permit id -> expiry (Redis ms)
    KEYS[3] latch of this release request
    ARGV[1] the released permit's id
    ARGV[2] the waiter's new permit id
    ARGV[3] the waiter's lease in ms
    ARGV[4] latch TTL in ms
    ARGV[5] "1" when the caller pipelined the handoff: its waiter holds the permit already

  Output:
    1 when handed over; 0 when the released permit was not held (unknown, released, or expired:
    it was free already, and the waiter tries for one as usual); 2 when it was released but not
    handed over: the total was cut below the permits held (a negative addPermits), and the
    permit pays off the cut (the waiter tries for one as usual); 3 when handed over though the
    total was cut (a pipelined handoff, whose waiter started on it: taking it back would leave
    it holding a permit Redis does not have; the caller stops pipelining, so the next handoff
    pays off the cut).
]]
--@include permits.lua
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if not expiry then
  -- Gone: a resend of a request whose first run handed it over or released it (its latch keeps
  -- which), or a permit that was not held. Asked only here: a first run finds the permit, and
  -- saves the call.
  return tonumber(redis.call('get', KEYS[3]) or '0')
end
local now = nowMs()
redis.call('zrem', KEYS[2], ARGV[1])
if tonumber(expiry) <= now then
  return 0
end
local answer = 1
if (freePermits(KEYS[1], KEYS[2], now) or 0) < 1 then
  answer = ARGV[5] == '1' and 3 or 2
end
if answer ~= 2 then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
end
redis.call('set', KEYS[3], answer, 'px', ARGV[4])
return answer
