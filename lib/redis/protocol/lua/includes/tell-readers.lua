--- @include "includes/process-of"
-- A writer waits for the key set k, which readers hold: each holder's process is told
-- ('w <lock key>' on its grant channel, once per process), as the holder of an exclusive lock
-- is: its line for the key (if a caller of it waits there too) knows that others wait.
local function tell_readers(k)
  local told = {}
  for _, t in ipairs(redis.call('ZRANGE', k.holders, 0, -1)) do
    local channel = '$GRANT_CHANNEL_PREFIX' .. process_of(t)
    if not told[channel] then
      told[channel] = true
      redis.call('PUBLISH', channel, '$WRITER_WORD ' .. k.lock)
    end
  end
end
