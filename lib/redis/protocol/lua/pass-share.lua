--[[
  PASS_SHARE: a permit passes from its holder to a waiter of the same process (single node, one
  key): the holder's token keeps its share in the holders zset, renewed to the next holder's
  lease, and a new fence is minted for it (permit fences are minted when the permit is taken,
  never reserved, so a permit taken after another ended always has the larger one). The
  waiter's own queue entry goes in the same step.
  Also says whether the pass went past a live waiter of another process queued before the
  waiter it went to (only such passes count toward localHandoffs): the entries ahead of the
  waiter are looked at, at most $PASS_SCAN of them (more, or a waiter not queued while others
  are, counts as going past).
  KEYS: the six keys of the lock key (see key-set)
  ARGV[1] holder token, ARGV[2] waiter token, ARGV[3] lease ms, ARGV[4] fences to reserve (1),
  ARGV[5] fence mode (see mint)
  Reply: {fence, 1 if it went past a waiter of another process else 0}, or {0, 0} when the
  holder's share is gone (lost: nothing changed).
]]
local holder, waiter, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local block, mode = tonumber(ARGV[4]), ARGV[5]
--- @include "includes/key-set"
--- @include "includes/now-ms"
--- @include "includes/mint"
--- @include "includes/other-waiter"
local k = key_set(1)
local now = now_ms()
local ends = redis.call('ZSCORE', k.holders, holder)
if not ends or tonumber(ends) <= now or redis.call('EXISTS', k.lock) == 0 then return {0, 0} end
local past = 0
local rank = redis.call('ZRANK', k.queue, waiter)
if not rank then
  -- Not queued: anyone queued counts as gone past.
  if redis.call('ZCARD', k.queue) > 0 then past = 1 end
elseif rank > $PASS_SCAN then
  -- Too many ahead to look at: counted as going past them.
  past = 1
elseif rank > 0 and other_waiter(k, redis.call('ZRANGE', k.queue, 0, rank - 1), holder, now) then
  past = 1
end
if redis.call('ZREM', k.queue, waiter) == 1 then redis.call('HDEL', k.meta, waiter) end
redis.call('ZADD', k.holders, now + ttl, holder)
local top = redis.call('ZRANGE', k.holders, -1, -1, 'WITHSCORES')
local ms = math.max(1, tonumber(top[2]) - now)
if redis.call('PTTL', k.lock) < ms then
  redis.call('PEXPIRE', k.lock, ms)
  redis.call('PEXPIRE', k.holders, ms)
end
return {mint(k.fence, block, mode), past}
