-- A writer (or a permit waiter) waits for the key set k: its wait flag is '1' for at least ms.
local function flag(k, ms)
  local left = redis.call('PTTL', k.wait)
  if left < ms then
    redis.call('SET', k.wait, '1', 'PX', ms)
  elseif redis.call('GET', k.wait) ~= '1' then
    -- A racing reader's flag ('r'): a writer (or a permit waiter) waits now.
    redis.call('SET', k.wait, '1', 'PX', left)
  end
end
