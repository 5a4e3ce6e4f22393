-- A fenced lock's token key holds "<token>:<owner field>": the last token minted for the lock,
-- and the hold it was minted for. The token of a hold is that token only while that field holds
-- the lock: a plain handle's hold of the same name has none, even when a force-unlock left the
-- key of the hold it took away (a fenced re-entry of that plain holder mints its own). A value
-- of digits alone (written before the owner was kept) names no hold.
local function readFence(tokenKey)
  local value = redis.call('get', tokenKey)
  if not value then
    return nil, nil
  end
  local token, minter = string.match(value, '^(%d+):(.+)$')
  if token then
    return token, minter
  end
  return string.match(value, '^(%d+)'), nil
end
