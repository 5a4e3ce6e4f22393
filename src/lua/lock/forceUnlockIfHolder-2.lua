--[[
  Deletes the lock only if the given holder still holds it, and then wakes waiters at once: the
  CLI's `force-unlock --if-holder`, so that an operator removes the stuck holder they looked at,
  never an owner that took the lock since (the check and the delete are one atomic step).

  Input:
    KEYS[1] lock hash key
    KEYS[2] release channel
    ARGV[1] the holder: a clientId (any owner of that client) or an owner field "<clientId>:<ownerId>"
    ARGV[2] release message to publish
    ARGV[3] publish command: "spublish" on a Cluster with sharded pub/sub (Redis >= 7), else "publish"

  Output:
    {1, field...} when the lock was deleted: the owner fields it had;
    {0, field...} when it was not: nobody holds it (no fields), or the owners that hold it instead.
]]
local holders = redis.call('hkeys', KEYS[1])
local clientPrefix = ARGV[1] .. ':'
for _, field in ipairs(holders) do
  if field == ARGV[1] or string.sub(field, 1, #clientPrefix) == clientPrefix then
    redis.call('del', KEYS[1])
    redis.call(ARGV[3], KEYS[2], ARGV[2])
    return {1, unpack(holders)}
  end
end
return {0, unpack(holders)}
