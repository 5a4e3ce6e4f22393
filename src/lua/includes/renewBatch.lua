-- The watchdog's batches (the renew scripts), pulled in with --@include: every hold of a batch
-- names `stride` keys in KEYS (hold i: KEYS[stride * (i - 1) + 1 ..]), its field in ARGV[i + 1],
-- and ARGV[1] is the lease in ms.

-- Answers, per hold, 1 where `renewOne(i, field)` extended it, 0 where its owner no longer has it.
-- A hold whose key Redis refuses to read as one (WRONGTYPE: the name now holds a semaphore's
-- count, or a user's key) is not held any more: 0 for it alone. Raised, the error would fail the
-- whole call, and every other hold of the batch would run out with it, tick after tick.
local function renewBatch(stride, renewOne)
  local renewed = {}
  for i = 1, #KEYS / stride do
    local ok, held = pcall(renewOne, i, ARGV[i + 1])
    renewed[i] = (ok and held) and 1 or 0
  end
  return renewed
end

-- Extends lock hash `lock` by `lease` ms if `field` still holds it; true when it did.
local function renewHold(lock, field, lease)
  if redis.call('hexists', lock, field) == 0 then
    return false
  end
  redis.call('pexpire', lock, lease)
  return true
end
