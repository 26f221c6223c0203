--[[
  HANDOFF: hand a held lock straight to another caller of the same process, in one round trip
  instead of a release plus an acquire; the new holder gets a new fence.
  KEYS: six per lock key (see key-set)
  ARGV[1] old token, ARGV[2] new token, ARGV[3] new lease ms, ARGV[4] fences to reserve per
  key, ARGV[5] fence mode (see mint)
  Reply: {1, fence1, ...}, or {0} when the old token no longer holds every key.
]]
local old, new, ttl, block, mode = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
--- @include "includes/key-set"
--- @include "includes/take"
for i = 1, #KEYS, 6 do
  if redis.call('GET', KEYS[i]) ~= old then return {0} end
end
local out = {1}
for i = 1, #KEYS, 6 do
  -- The new holder may have queued for a grant before: it must not be granted the key again.
  out[#out + 1] = take(key_set(i), new, ttl, block, mode, true)
end
return out
