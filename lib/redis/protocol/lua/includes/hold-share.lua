--- @include "includes/sync"
-- `token` holds a share of the key set k for `ttl` ms from `now` (server ms): the marker goes in
-- when the key is free, and the marker and the holders zset live as long as the longest lease.
local function hold_share(k, token, marker, ttl, now)
  if redis.call('EXISTS', k.lock) == 0 then
    redis.call('DEL', k.holders)
    redis.call('SET', k.lock, marker, 'PX', ttl)
  end
  redis.call('ZADD', k.holders, now + ttl, token)
  sync(k, now)
end
