--- @include "includes/entry"
-- Whether a live waiter queued ahead of `token` in the key set k keeps a shared caller of `kind`
-- out (a writer or a permit waiter; readers ahead of a reader let it join). Waiters whose
-- deadline passed (at `now`, server ms) leave the queue on the way.
local function held_up(k, token, kind, now)
  local rank = redis.call('ZRANK', k.queue, token)
  if rank == 0 then return false end
  local ahead = redis.call('ZRANGE', k.queue, 0, rank and rank - 1 or -1)
  for _, t in ipairs(ahead) do
    local meta = redis.call('HGET', k.meta, t)
    local _, deadline, kk = nil, 0, nil
    if meta then _, deadline, kk = entry(meta) end
    if deadline > now then
      if kind ~= 'r' or kk ~= 'r' then return true end
    else
      redis.call('ZREM', k.queue, t)
      redis.call('HDEL', k.meta, t)
    end
  end
  return false
end
