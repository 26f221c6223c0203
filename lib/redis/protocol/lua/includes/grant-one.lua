--- @include "includes/mint"
--- @include "includes/read-fence"
--- @include "includes/tell-grantee"
-- One queued shared waiter of the key set k gets its share for the claim window, and is told
-- (as an exclusive grant is: see pass_on). A reader's fence is the counter's value; a permit
-- mints one. Returns the fence.
local function grant_one(k, token, ttl, kind, now, mode)
  local claim = math.min(tonumber(ttl), $GRANT_CLAIM_MS)
  redis.call('ZADD', k.holders, now + claim, token)
  if redis.call('PTTL', k.lock) < claim then redis.call('PEXPIRE', k.lock, claim) end
  if redis.call('PTTL', k.holders) < claim then redis.call('PEXPIRE', k.holders, claim) end
  local fence
  if kind == 'r' then fence = read_fence(k.fence) else fence = mint(k.fence, 1, mode) end
  tell_grantee(k.lock, token, fence, 0)
  return fence
end
