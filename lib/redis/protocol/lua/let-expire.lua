--[[
  LET_EXPIRE: release by expiry (minHold): leave every key the token still holds locked for
  ARGV[2] ms more, then let Redis expire it, instead of deleting it now. Nothing is granted or
  published: waiters learn of the expiry on their retry timer (the busy answer tells them the
  lease left). A key that is no longer the token's is left alone.
  KEYS: six per lock key (see key-set; only the locks are used)
  ARGV[1] token, ARGV[2] ms
  Reply: the number of keys left to expire.
]]
local token, ms = ARGV[1], ARGV[2]
local kept = 0
for i = 1, #KEYS, 6 do
  local lock = KEYS[i]
  if redis.call('GET', lock) == token then
    redis.call('PEXPIRE', lock, ms)
    kept = kept + 1
  end
end
return kept
