--- @include "includes/now-ms"
--- @include "includes/entry"
--- @include "includes/mint"
--- @include "includes/flag"
--- @include "includes/marker-of"
--- @include "includes/room-of"
--- @include "includes/tell-grantee"
--- @include "includes/grant-room"
-- The lock of the key set k and its wait flag were just deleted, and the flag was there: someone
-- waits. The oldest queued waiter whose deadline has not passed gets the key (shared waiters at
-- the head: as many as the key admits, together); with nobody queued, the racing waiters are
-- woken. `block` fences are reserved for an exclusive grant. Returns the fence of a grant, or
-- -1 when racing waiters were woken.
local function pass_on(k, block, mode)
  local now = nil
  while true do
    local head = redis.call('ZRANGE', k.queue, 0, 0)
    if #head == 0 then break end
    local token = head[1]
    local meta = redis.call('HGET', k.meta, token)
    now = now or now_ms()
    local ttl, deadline, kind = nil, 0, nil
    if meta then ttl, deadline, kind = entry(meta) end
    if kind and deadline > now then
      redis.call('SET', k.lock, marker_of(kind), 'PX', $GRANT_CLAIM_MS)
      redis.call('DEL', k.holders)
      local fence = grant_room(k, kind, room_of(kind), mode)
      flag(k, math.max(redis.call('PTTL', k.queue), 1000))
      return fence
    end
    redis.call('ZREM', k.queue, token)
    redis.call('HDEL', k.meta, token)
    -- Skip waiters that gave up (or died): their deadline passed.
    if deadline > now then
      -- A claim, not the full lease: the waiter's process turns it into its lease when the
      -- grant reaches it, so a grant to a process that died costs the claim, not a ttl.
      redis.call('SET', k.lock, token, 'PX', math.min(tonumber(ttl), $GRANT_CLAIM_MS))
      local fence = mint(k.fence, block, mode)
      -- The others still queued (or racing) keep the flag, as long as the queue lives.
      flag(k, math.max(redis.call('PTTL', k.queue), 1000))
      tell_grantee(k.lock, token, fence, block - 1)
      return fence
    end
  end
  redis.call('PUBLISH', k.lock .. '$RELEASE_CHANNEL_SUFFIX', '$RELEASED_MESSAGE')
  return -1
end
