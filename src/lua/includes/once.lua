-- Runs `run` once per request: its answer (a number) is kept in the request's latch key for
-- `ttlMs`, and a resend of the request (ioredis sends a command again after a reconnect that lost
-- its reply) answers it without running again.
local function once(latchKey, ttlMs, run)
  local done = redis.call('get', latchKey)
  if done then
    return tonumber(done)
  end
  local answer = run()
  redis.call('set', latchKey, answer, 'px', ttlMs)
  return answer
end
