--- @include "includes/process-of"
-- Tells the grantee's process (its token's prefix names its channel) that a release granted it
-- a lock or a share: 'g <token> <fence> <spare fences> <lock key>'. The grantee holds once its
-- claim is confirmed.
local function tell_grantee(lock, token, fence, spare)
  redis.call('PUBLISH', '$GRANT_CHANNEL_PREFIX' .. process_of(token),
    '$GRANT_WORD ' .. token .. ' ' .. string.format('%.0f', fence) .. ' ' .. spare .. ' ' .. lock)
end
