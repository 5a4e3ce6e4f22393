--[[
  The current holder's fencing token.

  Input:
    KEYS[1] lock hash key
    KEYS[2] token key, "rlock__fence:{<lock key>}"

  Output:
    the token (a string of digits) while anyone holds the lock: the last one minted, since only
    an acquire of a free lock mints one; nil when the lock is free.
]]
if redis.call('exists', KEYS[1]) == 0 then
  return nil
end
return redis.call('get', KEYS[2])
