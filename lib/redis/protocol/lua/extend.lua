--[[
  EXTEND: renew the lease of every key, only if the token still holds all of them.
  KEYS: six per lock key (see key-set; only the locks are used)
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] '1' to put the lock back on keys that are missing
  (quorum repair: a node that restarted empty, while the holder keeps a majority elsewhere; the
  caller gives a repair back when the majority is not there)
  Reply: 1 renewed, 2 renewed with missing keys put back, 0 lost (a key held by another token,
  or missing with no repair asked).
]]
local token, ttl, repair = ARGV[1], ARGV[2], ARGV[3] == '1'
local missing = 0
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  if not owner then
    if not repair then return 0 end
    missing = missing + 1
  elseif owner ~= token then
    return 0
  end
end
for i = 1, #KEYS, 6 do
  redis.call('SET', KEYS[i], token, 'PX', ttl)
end
if missing > 0 then return 2 end
return 1
