--- @include "includes/pass-on"
-- Frees the lock of the key set k (which the caller holds): one DEL with nobody waiting, else
-- pass_on. Returns the fence of a grant (> 0), 0 when nobody waited, -1 when racing waiters
-- were woken.
local function grant_or_free(k, block, mode)
  -- Deletes the lock and the flag; 2 means the flag was there: someone waits.
  if redis.call('DEL', k.lock, k.wait) < 2 then return 0 end
  return pass_on(k, block, mode)
end
