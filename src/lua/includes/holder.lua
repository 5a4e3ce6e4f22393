-- Whether a force-unlock may remove a lock whose owner fields are `holders`: always when no
-- holder is wanted (''), else only while `wanted` holds it, a clientId (any owner of that
-- client) or an owner field "<clientId>:<ownerId>". The CLI's `force-unlock` sends the holder
-- its operator looked at, so that the check and the delete are one atomic step and an owner
-- that took the lock since is never the one removed.
local function heldBy(holders, wanted)
  if #holders == 0 then
    return false
  end
  if wanted == nil or wanted == '' then
    return true
  end
  local clientPrefix = wanted .. ':'
  for _, field in ipairs(holders) do
    if field == wanted or string.sub(field, 1, #clientPrefix) == clientPrefix then
      return true
    end
  end
  return false
end
