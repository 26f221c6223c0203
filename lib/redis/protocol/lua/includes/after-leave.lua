--- @include "includes/now-ms"
--- @include "includes/room-of"
--- @include "includes/grant-room"
-- A waiter left the queue of the key set k: shared waiters it held up may fit now.
local function after_leave(k, mode)
  local owner = redis.call('GET', k.lock)
  if not owner or string.byte(owner, 1) ~= 0 then return end
  redis.call('ZREMRANGEBYSCORE', k.holders, '-inf', now_ms())
  local kind = string.sub(owner, 2)
  grant_room(k, kind, room_of(kind) - redis.call('ZCARD', k.holders), mode)
end
