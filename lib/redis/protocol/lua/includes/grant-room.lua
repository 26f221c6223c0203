--- @include "includes/now-ms"
--- @include "includes/entry"
--- @include "includes/grant-one"
--- @include "includes/tell-readers"
-- Grants the queued shared waiters of `kind` at the head of the queue of the key set k, up to
-- `room` of them (a waiter of another kind stops the run: a writer is not overtaken). Returns the
-- first fence, or 0.
local function grant_room(k, kind, room, mode)
  local first, now = 0, now_ms()
  while room > 0 do
    local head = redis.call('ZRANGE', k.queue, 0, 0)
    if #head == 0 then break end
    local token = head[1]
    local meta = redis.call('HGET', k.meta, token)
    local ttl, deadline, kk = nil, 0, nil
    if meta then ttl, deadline, kk = entry(meta) end
    if deadline > now and kk ~= kind then
      if kind == 'r' then
        -- A writer queued behind the readers: their processes are told that others wait.
        tell_readers(k)
      end
      break
    end
    redis.call('ZREM', k.queue, token)
    redis.call('HDEL', k.meta, token)
    if deadline > now then
      local fence = grant_one(k, token, ttl, kind, now, mode)
      if first == 0 then first = fence end
      room = room - 1
    end
  end
  return first
end
