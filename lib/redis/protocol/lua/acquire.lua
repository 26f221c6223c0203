--[[
  ACQUIRE: take every key or none (the attempts of a waiting caller; several keys).
  KEYS: six per lock key (see key-set)
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] how long this caller will wait (ms; '0' = one try),
  ARGV[4] '1' to queue for a grant (single key, single node), '0' to race (flag the key),
  ARGV[5] fences to reserve per key (the first is the holder's), ARGV[6] fence mode (see mint)
  Reply: {1, fence1, fence2, ...} when taken (also when the token already holds them: a grant
  whose message was lost, or a lost reply), or {0, pttl} with the lease left of the first busy
  key.
]]
local token, ttl, wait_ms, queue = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local block, mode = tonumber(ARGV[5]), ARGV[6]
--- @include "includes/mint"
-- One key, free: a single SET NX first, before the other functions below are even defined.
if #KEYS == 6 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then
  local queued, meta = KEYS[4], KEYS[5]
  -- The fence is minted in the same round trip as the lock.
  local fence = mint(KEYS[2], block, mode)
  -- A waiter that queued earlier leaves the queue (a first try never queued).
  if queue and wait_ms > 0 and redis.call('ZREM', queued, token) == 1 then
    redis.call('HDEL', meta, token)
  end
  return {1, fence}
end
--- @include "includes/key-set"
--- @include "includes/take"
--- @include "includes/enqueue"
--- @include "includes/flag"
--- @include "includes/marker-of"
--- @include "includes/tell-readers"
for i = 1, #KEYS, 6 do
  local k = key_set(i)
  local owner = redis.call('GET', k.lock)
  if owner and owner ~= token then
    if wait_ms > 0 then
      if queue then
        enqueue(k, token, ttl, wait_ms)
      else
        flag(k, wait_ms)
        if owner == marker_of('r') then tell_readers(k) end
      end
    end
    return {0, redis.call('PTTL', k.lock)}
  end
end
local out = {1}
for i = 1, #KEYS, 6 do
  -- A waiter that queued earlier leaves the queue (a first try never queued).
  out[#out + 1] = take(key_set(i), token, ttl, block, mode, queue and wait_ms > 0)
end
return out
