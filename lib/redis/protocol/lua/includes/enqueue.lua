--- @include "includes/now-us"
--- @include "includes/flag"
--- @include "includes/marker-of"
--- @include "includes/tell-readers"
--- @include "includes/process-of"
-- Queues `token` for a grant of the key set k: lease `ttl` ms, waiting `wait_ms` more, `kind`
-- for a shared waiter ('r' or N; nil: exclusive). The holder's process hears of a waiter of
-- another process.
local function enqueue(k, token, ttl, wait_ms, kind)
  local us = now_us()
  local now = math.floor(us / 1000)
  -- Ordered by the server's clock in microseconds: members with the same score come out by
  -- their bytes (by token), so a score in ms would reorder the waiters of one millisecond.
  redis.call('ZADD', k.queue, 'NX', us, token)
  local meta = ttl .. ':' .. (now + wait_ms)
  if kind then meta = meta .. ':' .. kind end
  redis.call('HSET', k.meta, token, meta)
  -- The queue disappears by itself once every waiter's deadline has passed.
  local keep = wait_ms + 1000
  if redis.call('PTTL', k.queue) < keep then
    redis.call('PEXPIRE', k.queue, keep)
    redis.call('PEXPIRE', k.meta, keep)
  end
  flag(k, keep)
  local owner = redis.call('GET', k.lock)
  if not kind and owner == marker_of('r') then
    -- A writer queued behind readers: their processes are told that others wait.
    tell_readers(k)
  elseif owner and string.byte(owner, 1) ~= 0 then
    -- Tells the holder's process (a token's) that a waiter of another process queued: it passes
    -- the key to its own callers past localHandoffs only while nobody else waits.
    local holder = process_of(owner)
    if holder and holder ~= process_of(token) then
      redis.call('PUBLISH', '$GRANT_CHANNEL_PREFIX' .. holder, '$WRITER_WORD ' .. k.lock)
    end
  end
end
