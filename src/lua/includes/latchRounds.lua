-- A latch's rounds: each trySetCount that sets a count starts one, which ends when the count
-- reaches 0 ("open") or on delete() ("deleted"). An awaiter remembers the round it saw closed
-- and asks how that round ended: without it, a latch that opened and was set again before the
-- awaiter read it (the message is on its way while a round is set) had the awaiter wait on the
-- new round, for good without a waitTime (Redisson's latch has the same race).
--
-- The rounds hash "rlock__latch_rounds:{<key>}": field "round" is the current round's id, field
-- "ended" the outcomes of the last KEPT_OUTCOMES rounds that ended, newest first,
-- "<id>=<outcome>;...". Only HGET/HSET/DEL/PEXPIRE/TIME: no command beyond the ACL recipe's
-- (docs/security.md).

-- An awaiter more rounds behind than this (the latch set again and again before it read) counts
-- its round as opened: the outcome of every round is not kept.
local KEPT_OUTCOMES = 8

-- Starts a round. Its id is Redis's time in ms (or one more than the last id): ids keep growing
-- after a deleted latch's hash expired, so an awaiter of a round before it is never taken for
-- one of the new rounds. The hash is written anew: it loses the TTL a delete() gave it.
local function startRound(roundsKey)
  local time = redis.call('time')
  local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local last, ended = redis.call('hget', roundsKey, 'round'), redis.call('hget', roundsKey, 'ended')
  local round = string.format('%d', math.max(tonumber(last or '0') + 1, nowMs))
  redis.call('del', roundsKey)
  if ended then
    redis.call('hset', roundsKey, 'round', round, 'ended', ended)
  else
    redis.call('hset', roundsKey, 'round', round)
  end
end

-- Records how the current round ended (a latch set before rounds were kept has none: nothing).
local function endRound(roundsKey, outcome)
  local round, ended = redis.call('hget', roundsKey, 'round'), redis.call('hget', roundsKey, 'ended')
  if not round then
    return
  end
  local kept = { round .. '=' .. outcome }
  for entry in string.gmatch(ended or '', '[^;]+') do
    if #kept == KEPT_OUTCOMES then
      break
    end
    kept[#kept + 1] = entry
  end
  redis.call('hset', roundsKey, 'ended', table.concat(kept, ';'))
end

-- How round `id` ended ("open", "deleted"), or false when it did not (or is no longer kept).
local function outcomeOf(roundsKey, id)
  local ended = redis.call('hget', roundsKey, 'ended')
  return ended and string.match(';' .. ended, ';' .. id .. '=(%a+)') or false
end
