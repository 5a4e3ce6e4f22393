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

-- The current round's id (false: none). Every script reads it before it writes anything, so
-- that a rounds key of another type fails it (WRONGTYPE) with nothing written.
local function currentRound(roundsKey)
  return redis.call('hget', roundsKey, 'round')
end

-- Starts a round after round `last` (currentRound's answer). Its id is Redis's time in ms (or one
-- more than the last id): ids keep growing after a deleted latch's hash expired, so an awaiter of
-- a round before it is never taken for one of the new rounds. The hash is written anew: it loses
-- the TTL a delete() gave it.
local function startRound(roundsKey, last)
  local time = redis.call('time')
  local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local round = string.format('%d', math.max(tonumber(last or '0') + 1, nowMs))
  local ended = redis.call('hget', roundsKey, 'ended')
  redis.call('del', roundsKey)
  if ended then
    redis.call('hset', roundsKey, 'round', round, 'ended', ended)
  else
    redis.call('hset', roundsKey, 'round', round)
  end
end

-- Records how round `round` (currentRound's answer) ended; a latch set before rounds were kept
-- has none: nothing.
local function endRound(roundsKey, round, outcome)
  if not round then
    return
  end
  local kept = { round .. '=' .. outcome }
  for entry in string.gmatch(redis.call('hget', roundsKey, 'ended') or '', '[^;]+') do
    if #kept == KEPT_OUTCOMES then
      break
    end
    kept[#kept + 1] = entry
  end
  redis.call('hset', roundsKey, 'ended', table.concat(kept, ';'))
end

-- How an awaiter's round ended: "open", "deleted", "lost" (its round is neither current nor kept,
-- and the kept rounds are not too many to hold it: the rounds were lost, deleted and expired, or
-- in a restart), or false (not ended). `exact`: `since` is the id of the round the awaiter found
-- counting; otherwise the awaiter found none (requireInit on a latch not set) and waits for the
-- first round with an id from `since` on. A round older than every kept one counts as opened.
local function outcomeOf(roundsKey, since, exact, current)
  local first, firstOutcome, count, oldest = nil, false, 0, nil
  for id, outcome in string.gmatch(redis.call('hget', roundsKey, 'ended') or '', '(%d+)=(%a+)') do
    local n = tonumber(id)
    count, oldest = count + 1, n -- newest first: the last one read is the oldest kept
    if n >= since and (not first or n < first) then
      first, firstOutcome = n, outcome
    end
  end
  local trimmed = count >= KEPT_OUTCOMES and oldest > since
  if exact then
    if first == since then
      return firstOutcome
    end
    -- Still counting, or no rounds at all (the data lost, or deleted and expired, with no round
    -- set since): the caller takes the latch as it reads now.
    if not current or tonumber(current) == since then
      return false
    end
    return trimmed and 'open' or 'lost'
  end
  if not first then
    return false
  end
  return (trimmed and first == oldest) and 'open' or firstOutcome
end
