--[[
  Takes the lock for an owner (as lock/acquire-3.lua) and, on a first acquire, mints its fencing
  token; a reentrant acquire keeps the token the hold already has, or, when the owner's hold
  came from a plain handle of the same name (no token of its own), mints one.

  Input:
    KEYS[1] lock hash key
    KEYS[2] waiting clients (zset, arrival order), as lock/acquire-3.lua
    KEYS[3] their deadlines (zset, Redis ms)
    KEYS[4] token key, "rlock__fence:{<lock key>}": "<token>:<owner field>", the last token
            minted for this lock and the hold it was minted for (see fence.lua), with the lock's
            TTL: every acquire and renewal (fencedLock/renew.lua) sets both, so it lives as long
            as the lock and no longer, Redisson #6510
    ARGV[1] lease in ms (the key's new TTL; a re-entry only lengthens it)
    ARGV[2] owner field, "<clientId>:<ownerId>"
    ARGV[3] "1" when the caller waits: its client queues when the lock is someone else's
    ARGV[4] queue timeout in ms
    ARGV[5] "1" when the owner believes it holds the lock (a re-entry); optional

  Output:
    the holder's token as a string of digits on success (the owner's hold count went up by one);
    {token} instead when ARGV[5] said the owner held the lock but the lock was free (its hold was
    lost: this is a new one, see lock/acquire-3.lua's "afresh");
    otherwise the lock's remaining TTL in ms (PTTL), an integer.

  A new token is max(last + 1, Redis TIME in µs): a server that restarted without its data (or a
  replica promoted before the last token reached it), or a lock whose token key expired with it,
  starts again from its clock, not from 1, so it still answers a token above every one minted
  before, as long as its clock did not go back (by more than a lease, for an expired key: the
  key outlives the last mint by a lease at least).
  A Lua number is a double: exact up to 2^53 µs (year 2255); formatted with %.0f, not tostring,
  which would answer "1.7e+15".
]]
--@include clientQueue.lua
--@include lease.lua
--@include fence.lua
local locked = redis.call('exists', KEYS[1]) == 1
if locked and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  if ARGV[3] == '1' then
    enqueue(clientOf(ARGV[2]), nowMs(), tonumber(ARGV[4]))
  end
  return redis.call('pttl', KEYS[1])
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
if locked then
  lengthenLease(KEYS[1], ARGV[1])
else
  redis.call('pexpire', KEYS[1], ARGV[1])
end
if ARGV[3] == '1' then
  removeEntry(clientOf(ARGV[2]))
end
-- The token key lives as long as the lock: a fresh lock's TTL is the lease just set.
local ttl = locked and redis.call('pttl', KEYS[1]) or tonumber(ARGV[1])
local last, minter = readFence(KEYS[4])
if locked and minter == ARGV[2] then
  redis.call('pexpire', KEYS[4], ttl)
  return last
end
local now = redis.call('time')
local token = math.max(tonumber(last or '0') + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
token = string.format('%.0f', token)
redis.call('set', KEYS[4], token .. ':' .. ARGV[2], 'px', ttl)
if not locked and ARGV[5] == '1' then
  return {token}
end
return token
