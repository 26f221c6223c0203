--[[
  RAISE_FENCE: quorum only: raise each fence counter to at least the fence the holder was given,
  so the next holder's fence is larger on every node of any majority.
  KEYS: six per lock key (see key-set; only the counters are used)
  ARGV[n] the fence of lock key n
  Reply: 1.
]]
for i = 1, #KEYS, 6 do
  local fence, want = KEYS[i + 1], ARGV[(i + 5) / 6]
  local have = redis.call('GET', fence)
  if not have then
    redis.call('SET', fence, want, 'PX', $FENCE_COUNTER_LIFETIME_MS)
  elseif tonumber(have) < tonumber(want) then
    redis.call('SET', fence, want, 'KEEPTTL')
  end
end
return 1
