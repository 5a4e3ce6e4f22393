--[[
  A storage write guarded by a fencing token, for data kept in Redis: sets the value only if the
  token is not older than the newest token a write to this key was accepted with.

  Input:
    KEYS[1] the data key (the caller's own key, no prefix added)
    KEYS[2] its fence, "rlock__fenced_by:{<data key>}": the newest token accepted for it
    KEYS[3] the kind marker a semaphore, permit-expirable semaphore or latch by the data key's
            name would have, "rlock__kind:{<data key>}" (the fence's slot)
    ARGV[1] the writer's token, a string of digits without leading zeros
    ARGV[2] the value

  Output:
    1 written (the fence moves up to the token); 0 refused: a holder with a newer token has
    written since, so this writer's lock is gone and its write would overwrite newer work;
    -1 refused: the data key holds a hash (another lock's, say), which a SET would have replaced;
    -2 refused: the data key is the count of a semaphore or a latch (its kind marker is set).

  Tokens are compared as digit strings (length, then lexically), exact at any size.
]]
-- A hash (another lock's, say) answers HEXISTS without an error, any other type with WRONGTYPE:
-- O(1) and within the ACL recipe's commands (TYPE is not in it; GET copied the whole value).
if redis.call('exists', KEYS[1]) == 1 and type(redis.pcall('hexists', KEYS[1], '')) == 'number' then
  return -1
end
-- A semaphore's or latch's count is a string like any other: SET gave a semaphore with no free
-- permit the value written as its count (a helper audit: 1000 free permits).
if redis.call('exists', KEYS[3]) == 1 then
  return -2
end
local newest = redis.call('get', KEYS[2])
if newest and (#ARGV[1] < #newest or (#ARGV[1] == #newest and ARGV[1] < newest)) then
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call('set', KEYS[2], ARGV[1])
return 1
