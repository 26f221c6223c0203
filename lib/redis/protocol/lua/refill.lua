--[[
  REFILL: single node, while the process passes a held key from caller to caller in memory (the
  token in Redis stays the same): reserve more fences for those handoffs ahead of need, so the
  next callers get the key with no round trip. Only the holding token mints, so fences stay
  increasing across every holder. The lease is left as it is (a renewal is the watchdog's,
  which knows maxHold).
  KEYS: the six keys of the lock key (see key-set)
  ARGV[1] token, ARGV[2] fences to reserve, ARGV[3] fence mode (see mint)
  Reply: {0} not ours any more, or {1, first fence, 1 when a live waiter of another process is
  queued else 0}.
]]
local token, block, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
--- @include "includes/key-set"
--- @include "includes/mint"
--- @include "includes/now-ms"
--- @include "includes/other-waiter"
local k = key_set(1)
if redis.call('GET', k.lock) ~= token then return {0} end
local fence = mint(k.fence, block, mode)
local others = 0
local queued = redis.call('ZRANGE', k.queue, 0, 7)
if #queued > 0 and other_waiter(k, queued, token, now_ms()) then others = 1 end
return {1, fence, others}
