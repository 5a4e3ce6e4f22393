--[[
  The waiting clients' heartbeat: one call per client and period refreshes the deadline of its
  entry in the queue of every lock it has waiters on, so that only the entries of stopped or
  dead processes run out.

  Input:
    KEYS[3i-2], KEYS[3i-1], KEYS[3i]  lock hash, waiting clients and deadline keys of lock i (all
                                      in one slot on Cluster)
    ARGV[1]                           queue timeout in ms
    ARGV[i+1]                         the clientId (the same for every lock)

  Output:
    an array with, per lock, 1 when the client is in line behind a held lock (refreshed) or holds
    it itself; 0 when the lock is free, or held by another client while this one is not in line
    (its wake-up went to a process that stopped, or Redis lost the queue): one of its waiters
    then tries again at once, which puts the client back in line.
]]
--@include queue.lua
local t = redis.call('time')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local answers = {}
for i = 1, #KEYS / 3 do
  local lock, queue, expiry, clientId = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], ARGV[i + 1]
  local answer = 0
  if redis.call('exists', lock) == 1 then
    if redis.call('zscore', expiry, clientId) then
      redis.call('zadd', expiry, deadline, clientId)
      keepQueueKeys(queue, expiry, tonumber(ARGV[1]))
      answer = 1
    else
      local prefix = clientId .. ':'
      for _, field in ipairs(redis.call('hkeys', lock)) do
        if string.sub(field, 1, #prefix) == prefix then
          answer = 1
        end
      end
    end
  end
  answers[i] = answer
end
return answers
