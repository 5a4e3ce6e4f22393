--[[
  Deletes the read-write lock whoever holds it, and the waiting writers' entries, and wakes
  every waiter of every process, readers and writers.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    KEYS[3] waiting writers (zset)
    KEYS[4] reader channel
    KEYS[5] writer channel
    ARGV[1] publish command
    ARGV[2] message waking every waiter of a process

  Output:
    the holder fields the lock had ("<clientId>:<ownerId>" for reads, with ":write" for the
    write lock); empty when nobody held it; -1 when the name is held as a plain, fair or fenced
    lock (a hash without `mode`): nothing removed, its waiters would not have been woken.
]]
if redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], 'mode') == 0 then
  return -1
end
local holders = {}
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
  if field ~= 'mode' then
    holders[#holders + 1] = field
  end
end
if redis.call('del', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  redis.call(ARGV[1], KEYS[4], ARGV[2])
  redis.call(ARGV[1], KEYS[5], ARGV[2])
end
return holders
