-- Wakes as many of a semaphore's waiters as its `available` permits can now serve, with one
-- counted message ("wake:<k>:<releaser>", see ChannelEntry.deliver; `releaser` is the releasing
-- client's id, empty when no client released, so that a client can tell its own releases). A
-- reservation (the multi-permit waiter that smaller requests may not overtake) is served first:
-- its holder is named in the message ("wake:<k>:<releaser>:<field>") once enough permits are
-- free for it, and only the permits beyond its request wake others; while it still lacks
-- permits, nobody else could use them. Returns how many clients the message reached (0: none
-- was sent).
local function wakeWaiters(reservationKey, channel, available, publish, releaser)
  if available <= 0 then
    return 0
  end
  local holder = redis.call('hget', reservationKey, 'field')
  if holder then
    local rest = available - tonumber(redis.call('hget', reservationKey, 'permits'))
    if rest >= 0 then
      return redis.call(publish, channel, 'wake:' .. rest .. ':' .. releaser .. ':' .. holder)
    end
    return 0
  end
  return redis.call(publish, channel, 'wake:' .. available .. ':' .. releaser)
end
