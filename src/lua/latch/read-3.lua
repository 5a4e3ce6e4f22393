--[[
  Reads a latch's count and its kind marker at once (one point in time, as the state needs both),
  with its current round and how a given round ended (see latchRounds.lua).
  GET, not MGET: MGET answers nil for a key of another type, so a name already used by a hash or
  a list read as a latch never set, and every await() on it returned at once. GET fails with
  WRONGTYPE instead.

  Input:
    KEYS[1] the count
    KEYS[2] the kind marker "rlock__kind:{<key>}"; another kind's is refused (WRONGTYPE)
    KEYS[3] the rounds "rlock__latch_rounds:{<key>}"
    ARGV[1] the round an awaiter waits for (see outcomeOf in latchRounds.lua), or "" (none asked)
    ARGV[2] "1" when ARGV[1] is the id of the round it found counting, "0" when it waits for the
            first round from that id on

  Output:
    {count, marker, the live round's id, outcome of the awaited round ("open", "deleted", "lost"),
    the latest round's id}, each nil when absent.
]]
--@include latchRounds.lua
--@include kind.lua
local marker = redis.call('get', KEYS[2])
local rounds = readRounds(KEYS[3])
local outcome = false
if string.match(ARGV[1], '^%d+$') then
  outcome = outcomeOf(rounds, tonumber(ARGV[1]), ARGV[2] == '1')
end
-- A semaphore's count read as a latch's: its getCount, its state "closed", an await() that never
-- ended. Refused instead (kind.lua), unless the awaited round has ended: a latch deleted and its
-- name taken by another kind before the awaiter re-read tells it "deleted".
local count = redis.call('get', KEYS[1])
if not outcome then
  assertMarker(marker, 'latch')
  -- A value no latch wrote (no marker either): read as a count it was NaN, closed for good.
  if count then
    countOf(count, 'latch')
  end
end
return { count, marker, rounds.live, outcome, rounds.round }
