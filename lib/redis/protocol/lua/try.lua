--[[
  TRY: a caller's first try for one key. It neither queues nor flags (it does not wait yet), so
  it takes only the two keys it needs: the uncontended acquire is a SET NX and a mint.
  KEYS[1] the lock, KEYS[2] its fence counter
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] fences to reserve, ARGV[4] fence mode (see mint)
  Reply: the first fence (an integer) when taken, or {pttl}: busy, the holder's lease left.
]]
local lock, fence = KEYS[1], KEYS[2]
if not redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {redis.call('PTTL', lock)}
end
--- @include "includes/mint"
return mint(fence, tonumber(ARGV[3]), ARGV[4])
