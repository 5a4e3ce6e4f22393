-- The lease of a hold entered again: it never shortens the lease the owner's other holds have
-- (a nested lock({ leaseTime: 200 }) inside a hold the watchdog keeps cut the key's TTL to
-- 200 ms, and another client took the lock while the outer hold ran); it only lengthens it, as
-- the read-write lock's holds do (Redisson #2144).
local function lengthenLease(key, lease)
  if redis.call('pttl', key) < tonumber(lease) then
    redis.call('pexpire', key, lease)
  end
end
