--- @include "includes/now-ms"
--- @include "includes/sync"
--- @include "includes/room-of"
--- @include "includes/grant-room"
--- @include "includes/grant-or-free"
-- A shared holder of the key set k lets go (nil when the token held no share there): the others
-- hold on, a freed permit goes to the next permit waiter, and the last one out frees the key as
-- a writer would. Returns as grant_or_free.
local function release_shared(k, token, block, mode)
  if redis.call('ZREM', k.holders, token) == 0 then return nil end
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', k.holders, '-inf', now)
  if not sync(k, now) then
    redis.call('DEL', k.holders)
    if redis.call('ZCARD', k.queue) == 0 and redis.call('GET', k.wait) == '1' then
      -- A racing writer waits (quorum, several keys): the key frees with its flag kept, so the
      -- readers the release wakes too stay out of it until the writer had it.
      redis.call('DEL', k.lock)
      redis.call('PUBLISH', k.lock .. '$RELEASE_CHANNEL_SUFFIX', '$RELEASED_MESSAGE')
      return -1
    end
    return grant_or_free(k, block, mode)
  end
  local kind = string.sub(redis.call('GET', k.lock), 2)
  if kind == 'r' then return 0 end
  local fence = grant_room(k, kind, room_of(kind) - redis.call('ZCARD', k.holders), mode)
  if fence > 0 then return fence end
  -- Racing permit waiters (quorum groups) look again.
  if redis.call('EXISTS', k.wait) == 1 then
    redis.call('PUBLISH', k.lock .. '$RELEASE_CHANNEL_SUFFIX', '$RELEASED_MESSAGE')
    return -1
  end
  return 0
end
