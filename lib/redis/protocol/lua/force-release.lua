--[[
  FORCE_RELEASE: the lock board frees a key from the token that holds it (read a moment
  before: a key taken by someone else meanwhile is left alone), as RELEASE would: to its oldest
  queued waiter, or to nobody with the racing waiters woken. The holder finds its lease lost at
  its next renewal.
  KEYS: six (see key-set)
  ARGV[1] the holder's token, ARGV[2] fences to reserve for an exclusive grant, ARGV[3] fence
  mode (see mint)
  Reply: 1 freed, 0 not that token's.
]]
local token, block, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
--- @include "includes/key-set"
--- @include "includes/grant-or-free"
local k = key_set(1)
if redis.call('GET', k.lock) ~= token then return 0 end
grant_or_free(k, block, mode)
return 1
