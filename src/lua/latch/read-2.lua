--[[
  Reads a latch's count and its kind marker at once (one point in time, as the state needs both).
  GET, not MGET: MGET answers nil for a key of another type, so a name already used by a hash or
  a list read as a latch never set, and every await() on it returned at once. GET fails with
  WRONGTYPE instead.

  Input:
    KEYS[1] the count
    KEYS[2] the kind marker "rlock__kind:{<key>}"

  Output:
    {count, marker}, each nil when absent.
]]
return { redis.call('get', KEYS[1]), redis.call('get', KEYS[2]) }
