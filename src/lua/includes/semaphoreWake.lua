-- Wakes as many of a semaphore's waiters as its `available` permits can now serve, with one
-- counted message ("wake:<k>", see ChannelEntry.deliver). A reservation (the multi-permit waiter
-- that smaller requests may not overtake) is served first: its holder is named in the message
-- ("wake:<k>:<field>") once enough permits are free for it, and only the permits beyond its
-- request wake others; while it still lacks permits, nobody else could use them.
local function wakeWaiters(reservationKey, channel, available, publish)
  if available <= 0 then
    return
  end
  local holder = redis.call('hget', reservationKey, 'field')
  if holder then
    local rest = available - tonumber(redis.call('hget', reservationKey, 'permits'))
    if rest >= 0 then
      redis.call(publish, channel, 'wake:' .. rest .. ':' .. holder)
    end
    return
  end
  redis.call(publish, channel, 'wake:' .. available)
end
