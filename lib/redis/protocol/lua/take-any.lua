--[[
  TAKE_ANY: a segmented sweep in one round trip (single node): take the first free key of the
  candidates, in the order given. A sweep only takes free keys, so it needs two keys each.
  KEYS: per candidate, its lock and its fence counter
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] fences to reserve, ARGV[4] fence mode (see mint)
  Reply: {1, candidate number (1-based), fence} or {0, shortest lease left among them}.
]]
local token, ttl, block, mode = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
--- @include "includes/mint"
local shortest = -1
for i = 1, #KEYS, 2 do
  local lock, fence = KEYS[i], KEYS[i + 1]
  if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    return {1, (i + 1) / 2, mint(fence, block, mode)}
  end
  local left = redis.call('PTTL', lock)
  if shortest < 0 or left < shortest then shortest = left end
end
return {0, shortest}
