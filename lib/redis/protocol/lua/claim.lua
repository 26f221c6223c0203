--[[
  CLAIM: a grantee confirms the grant a release made to its token (see pass-on): the key, still
  the token's, is renewed from its claim window to the full lease.
  KEYS: the six keys of one lock key (see key-set; the lock and its fence counter are used)
  ARGV[1] token, ARGV[2] lease ms
  Reply: the fence counter (the grant's fence and its spare ones end there: nothing else mints
  while the token holds the key unclaimed), '0' without a counter, or 0 when the key is not
  the token's. The grant message's own fence is an older grant's when the grant was made again
  meanwhile (it was undone, or lost in a failover, and the token queued again).
]]
local token = ARGV[1]
if redis.call('GET', KEYS[1]) ~= token then return 0 end
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return redis.call('GET', KEYS[2]) or '0'
