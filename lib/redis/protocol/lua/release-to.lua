--[[
  RELEASE_TO: release one key that has local waiters: grant it to the oldest waiter queued by
  another process and queue our own next waiter behind them; with nobody queued, hand it
  straight to our own next waiter.
  KEYS: the six keys of the lock key (see key-set)
  ARGV[1] token, ARGV[2] next local token, ARGV[3] its lease ms, ARGV[4] its remaining wait
  ms, ARGV[5] fences to reserve, ARGV[6] fence mode (see mint)
  Reply: {0} not ours any more, {2, fence} granted to another process (ours queued), {3, fence}
  handed to our next waiter.
]]
local token, next_token, next_ttl = ARGV[1], ARGV[2], ARGV[3]
local next_wait, block, mode = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
--- @include "includes/key-set"
--- @include "includes/mint"
--- @include "includes/grant-or-free"
--- @include "includes/enqueue"
local k = key_set(1)
if redis.call('GET', k.lock) ~= token then return {0} end
if redis.call('ZCARD', k.queue) > 0 then
  redis.call('ZREM', k.queue, next_token)
  redis.call('HDEL', k.meta, next_token)
  local fence = grant_or_free(k, block, mode)
  if fence > 0 then
    enqueue(k, next_token, next_ttl, next_wait)
    return {2, fence}
  end
  -- Every queued waiter had given up: the key is free now; take it for ours.
end
redis.call('SET', k.lock, next_token, 'PX', next_ttl)
return {3, mint(k.fence, block, mode)}
