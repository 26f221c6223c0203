--[[
  RENEW_MANY: renew many holds in one call, each by EXTEND's rule on its own lock keys. Every
  key of one call hashes to one slot on a Cluster (the batcher groups them so).
  KEYS: the lock keys of every hold, one hold after the other
  ARGV[1] '1' on quorums (put a missing lock back, as EXTEND does), then per hold: token, lease
  ms, how many of KEYS are its
  Reply: one code per hold: 0 lost (a key missing without repair, or someone else's), 1
  renewed, 2 repaired.
]]
local out = {}
local k = 0
local repair = ARGV[1] == '1'
for a = 2, #ARGV, 3 do
  local token, ttl, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local code, missing = 1, 0
  for i = k + 1, k + n do
    local owner = redis.call('GET', KEYS[i])
    if not owner then
      if not repair then code = 0 break end
      missing = missing + 1
    elseif owner ~= token then
      code = 0
      break
    end
  end
  if code == 1 then
    for i = k + 1, k + n do
      redis.call('SET', KEYS[i], token, 'PX', ttl)
    end
    if missing > 0 then code = 2 end
  end
  out[#out + 1] = code
  k = k + n
end
return out
