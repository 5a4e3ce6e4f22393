--[[
  Sets the latch's count, only if none is set (a latch that opened, or was deleted, has none:
  it can be set again).

  Input:
    KEYS[1] the count (a string; missing: unset, open or deleted, as the marker tells)
    KEYS[2] the kind marker "rlock__kind:{<key>}" (see kind.lua): "latch" once set, "deleted"
            for a while after delete()
    ARGV[1] count (>= 1)

  Output:
    1 when set, 0 when a count was set already.
]]
--@include kind.lua
return setMarkedOnce(KEYS[1], ARGV[1], KEYS[2], 'latch') and 1 or 0
