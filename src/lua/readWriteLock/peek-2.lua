--[[
  Reads, without writing, who holds the lock now: a holder whose lease ended is not counted
  even before a script drops it.

  Input:
    KEYS[1] lock hash
    KEYS[2] leases (zset)
    ARGV[1] holder field whose holds to count

  Output:
    { mode, holds }: mode "write", "read" or "" (free), and ARGV[1]'s hold count (0 when none).
]]
--@include readWriteLock.lua
local now = nowMs()
local mode = ''
for _, field in ipairs(redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf')) do
  if isWriteField(field) then
    mode = 'write'
    break
  end
  mode = 'read'
end
local holds = 0
local deadline = redis.call('zscore', KEYS[2], ARGV[1])
if deadline and tonumber(deadline) > now then
  holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or 0)
end
return { mode, holds }
