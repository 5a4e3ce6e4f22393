--[[
  Reads a latch's count and its kind marker at once (one point in time, as the state needs both),
  with its current round and how a given round ended (see latchRounds.lua).
  GET, not MGET: MGET answers nil for a key of another type, so a name already used by a hash or
  a list read as a latch never set, and every await() on it returned at once. GET fails with
  WRONGTYPE instead.

  Input:
    KEYS[1] the count
    KEYS[2] the kind marker "rlock__kind:{<key>}"
    KEYS[3] the rounds "rlock__latch_rounds:{<key>}"
    ARGV[1] the id of the round an awaiter waits on, or "" (no round asked about)

  Output:
    {count, marker, current round id, outcome of round ARGV[1] ("open" or "deleted")}, each nil
    when absent.
]]
--@include latchRounds.lua
local outcome = false
-- (Digits only: the id goes into a pattern.)
if string.match(ARGV[1], '^%d+$') then
  outcome = outcomeOf(KEYS[3], ARGV[1])
end
return { redis.call('get', KEYS[1]), redis.call('get', KEYS[2]), redis.call('hget', KEYS[3], 'round'), outcome }
