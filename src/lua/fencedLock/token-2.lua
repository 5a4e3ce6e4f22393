--[[
  The current holder's fencing token.

  Input:
    KEYS[1] lock hash key
    KEYS[2] token key, "rlock__fence:{<lock key>}"

  Output:
    the token (a string of digits) of the hold it was minted for while that hold is the lock's
    (only an acquire of a free lock, or a fenced re-entry of a hold that has none, mints one);
    nil when the lock is free, or held by a plain handle's hold that has no token.
]]
--@include fence.lua
if redis.call('exists', KEYS[1]) == 0 then
  return nil
end
local token, minter = readFence(KEYS[2])
if minter and redis.call('hexists', KEYS[1], minter) == 0 then
  return nil
end
return token
