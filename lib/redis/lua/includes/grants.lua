--- @include "includes/process-of"
-- Grants made by this script (locks and shares), flat: token, fence, spare fences.
-- RELEASE returns them to the releaser, whose process may be the grantee's: it then holds from
-- the answer, without waiting for the grant message.
local grants = {}
-- Tells the grantee's process (its token's prefix names its channel) and records the grant.
-- `now` is the server's clock (ms) read before the claim window was set: the window surely runs
-- until then + the claim, so a waiter that can bound its clock against the server's may hold at
-- once.
local function granted(lock, token, fence, spare, now)
  local f = string.format('%.0f', fence)
  local at = spare .. ':' .. string.format('%.0f', now)
  redis.call('PUBLISH', '$GRANT_CHANNEL_PREFIX' .. process_of(token),
    '$GRANT_WORD ' .. token .. ' ' .. f .. ' ' .. at .. ' ' .. lock)
  grants[#grants + 1] = token
  grants[#grants + 1] = f
  grants[#grants + 1] = spare
end
