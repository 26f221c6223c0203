--- @include "includes/mint"
-- `token` holds the key set k for `ttl` ms with `block` new fences (the first is returned); its
-- queue entry, if `queued` says it may have one, goes (it must not be granted the key again).
local function take(k, token, ttl, block, mode, queued)
  redis.call('SET', k.lock, token, 'PX', ttl)
  local fence = mint(k.fence, block, mode)
  if queued and redis.call('ZREM', k.queue, token) == 1 then
    redis.call('HDEL', k.meta, token)
  end
  return fence
end
