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

-- The rounds as they are: `round` the latest round's id (false: none), `ended` the kept outcomes,
-- `dropped` the newest id whose outcome was no longer kept (0: none), `born` the first round of
-- this hash (a round before it belongs to rounds whose hash was lost: deleted and expired, or a
-- restart; 0: not known), and `live` the round still counting (false when the latest one is
-- recorded as ended: a count set since by a client without rounds has none). Every script reads
-- them before it writes anything, so that a rounds key of another type fails it (WRONGTYPE) with
-- nothing written.
local function readRounds(roundsKey)
  local round = redis.call('hget', roundsKey, 'round')
  local ended = redis.call('hget', roundsKey, 'ended') or ''
  local dropped = tonumber(redis.call('hget', roundsKey, 'dropped') or '0')
  local born = tonumber(redis.call('hget', roundsKey, 'born') or '0')
  local live = round and not string.find(';' .. ended, ';' .. round .. '=', 1, true) and round
  return { round = round, ended = ended, dropped = dropped, born = born, live = live or false }
end

local function writeRounds(roundsKey, round, ended, dropped, born)
  redis.call('hset', roundsKey, 'round', round, 'ended', ended, 'dropped', string.format('%d', dropped), 'born', string.format('%d', born))
end

-- `ended` with the outcome `entry` ("<id>=<outcome>") first, at most KEPT_OUTCOMES long, and the
-- newest id it no longer keeps.
local function withOutcome(rounds, entry)
  local kept, dropped = { entry }, rounds.dropped
  for id, outcome in string.gmatch(rounds.ended, '(%d+)=(%a+)') do
    if #kept < KEPT_OUTCOMES then
      kept[#kept + 1] = id .. '=' .. outcome
    else
      dropped = math.max(dropped, tonumber(id))
    end
  end
  return table.concat(kept, ';'), dropped
end

-- Starts a round after `rounds` (readRounds' answer). Its id is Redis's time in ms (or one more
-- than the last id): ids keep growing after a deleted latch's hash expired, so an awaiter of a
-- round before it is never taken for one of the new rounds. A latest round still live lost its
-- count without a record (a client without rounds counted it down or deleted it, or the key was
-- deleted by hand): it ended as `vanished` says (what the latch reads as: opened or deleted). The
-- hash is written anew: it loses the TTL a delete() gave it.
local function startRound(roundsKey, rounds, vanished)
  local ended, dropped = rounds.ended, rounds.dropped
  if rounds.live then
    ended, dropped = withOutcome(rounds, rounds.live .. '=' .. vanished)
  end
  local time = redis.call('time')
  local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local id = math.max(tonumber(rounds.round or '0') + 1, nowMs)
  redis.call('del', roundsKey)
  writeRounds(roundsKey, string.format('%d', id), ended, dropped, rounds.round and rounds.born or id)
end

-- Records how the count that went ended. Its round is the live one; a count without one (set by
-- a client without rounds over a recorded round) is recorded as a round of its own after the
-- latest, so that an awaiter waiting for the first round after it (see outcomeOf) learns how it
-- ended. A latch with no rounds at all keeps none.
local function endRound(roundsKey, rounds, outcome)
  local round = rounds.live
  if not round then
    if not rounds.round then
      return
    end
    round = string.format('%d', tonumber(rounds.round) + 1)
  end
  local ended, dropped = withOutcome(rounds, round .. '=' .. outcome)
  writeRounds(roundsKey, round, ended, dropped, rounds.born)
end

-- How an awaiter's round ended: "open", "deleted", "lost" (its round is neither the latest nor
-- kept, and no outcome from it on was dropped: the rounds were lost, deleted and expired, or in a
-- restart, and a round was set since), or false (not ended). `exact`: `since` is the id of the
-- round the awaiter found counting; otherwise the awaiter found none (requireInit on a latch not
-- set) and waits for the first round with an id from `since` on. An awaiter whose round may be
-- among those no longer kept counts it as opened.
local function outcomeOf(rounds, since, exact)
  local first, firstOutcome
  for id, outcome in string.gmatch(rounds.ended, '(%d+)=(%a+)') do
    local n = tonumber(id)
    if n >= since and (not first or n < first) then
      first, firstOutcome = n, outcome
    end
  end
  local trimmed = rounds.dropped >= since
  if exact then
    if first == since then
      return firstOutcome
    end
    -- Its round came before this hash's first: the rounds it belonged to were lost.
    if since < rounds.born then
      return 'lost'
    end
    -- Still counting, or no rounds at all (the data lost, or deleted and expired, with no round
    -- set since): the caller takes the latch as it reads now.
    if not rounds.round or tonumber(rounds.round) == since then
      return false
    end
    return trimmed and 'open' or 'lost'
  end
  if not first then
    return false
  end
  return trimmed and 'open' or firstOutcome
end
