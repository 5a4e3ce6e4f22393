--[[
  Takes several plain locks of one Redis slot for fresh owners, all or none: a MultiLock's round
  over members of one client (on a Cluster, of one slot) in one call (family.md, MultiLock
  "cluster": same-slot members in one all-or-nothing script). Each is taken as acquire-3.lua takes
  it for a single attempt that does not wait (no queue entry); no other client sees some taken
  and others not.

  Input (the caller passes the number of keys):
    KEYS[1..n] lock hash keys
    ARGV[1] lease in ms
    ARGV[2..n+1] the owner field of each lock, "<clientId>:<ownerId>" (a resend of this call
            finds its own fields: entered again, as acquire-3.lua's resend is)

  Output: nil when every lock was taken; else {i, pttl}: lock i (1-based) is someone else's for
  another pttl ms, and nothing was written.
]]
--@include lease.lua
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 and redis.call('hexists', KEYS[i], ARGV[i + 1]) == 0 then
    return {i, redis.call('pttl', KEYS[i])}
  end
end
for i = 1, #KEYS do
  local free = redis.call('exists', KEYS[i]) == 0
  redis.call('hincrby', KEYS[i], ARGV[i + 1], 1)
  if free then
    redis.call('pexpire', KEYS[i], ARGV[1])
  else
    lengthenLease(KEYS[i], ARGV[1])
  end
end
return nil
