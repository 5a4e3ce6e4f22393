--[[
  Takes the lock for an owner, or enters it again when the owner already holds it.

  Input:
    KEYS[1] lock hash key
    ARGV[1] lease in ms (the key's new TTL)
    ARGV[2] owner field, "<clientId>:<ownerId>"

  Output:
    nil on success (the owner's hold count went up by one);
    otherwise the lock's remaining TTL in ms (PTTL), so the caller knows how long to wait.
]]
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
