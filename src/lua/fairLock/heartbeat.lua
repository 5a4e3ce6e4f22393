--[[
  The waiters' heartbeat: one call per client and period refreshes the deadline of every queue
  entry the client's parked waiters have, so that only the entries of stopped or dead processes
  run out.

  Input:
    KEYS[3i-2], KEYS[3i-1], KEYS[3i]  lock hash, queue and queue-deadline keys of entry i (all in
                                      one slot on Cluster)
    ARGV[1]                           queue timeout in ms
    ARGV[i+1]                         member of entry i

  Output:
    an array with, per entry, 0 when it is not queued any more (granted, or dropped as dead) or
    the lock is free without anyone having been handed it (a grant or lease ran out unreleased):
    its waiter then asks again at once. Otherwise it is still queued behind a held lock
    (refreshed), and the value is the lock's PTTL, at least 2 (1: no TTL): unless renewed, the
    lock runs out then, and the waiter asks then. A grant to a process that can no longer take it
    (stopped, or killed just before the release, while Redis still counted its subscription)
    lives its lease and is renewed by nobody: its next waiter asks as it runs out (it asked at
    its next heartbeat before, up to a third of the queue timeout later).
]]
--@include queue.lua
local t = redis.call('time')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local queued = {}
for i = 1, #KEYS / 3 do
  local lock, queue, expiry, member = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], ARGV[i + 1]
  if redis.call('zscore', expiry, member) then
    redis.call('zadd', expiry, deadline, member)
    keepQueueKeys(queue, expiry, tonumber(ARGV[1]))
    local pttl = redis.call('pttl', lock)
    if pttl == -2 then
      queued[i] = 0
    elseif pttl == -1 then
      queued[i] = 1
    else
      queued[i] = math.max(pttl, 2)
    end
  else
    queued[i] = 0
  end
end
return queued
