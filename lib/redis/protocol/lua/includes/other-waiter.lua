--- @include "includes/process-of"
--- @include "includes/entry"
-- Whether one of `tokens` (queued for the key set k) is a live waiter (deadline not passed at
-- `now`, server ms) of another process than the one of `token`.
local function other_waiter(k, tokens, token, now)
  local mine = process_of(token)
  for _, t in ipairs(tokens) do
    if process_of(t) ~= mine then
      local meta = redis.call('HGET', k.meta, t)
      if meta then
        local _, deadline = entry(meta)
        if deadline > now then return true end
      end
    end
  end
  return false
end
