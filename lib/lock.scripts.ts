/**
 * The lock protocol, one atomic Lua script per step. Every script takes its keys in groups of
 * three per lock key, all sharing one Redis Cluster hash tag:
 *   KEYS[i]     `<prefix>{<key>}`        the lock, value = the holder's token, with a PX lease
 *   KEYS[i + 1] `<prefix>{<key>}:fence`  the fencing counter, never expires
 *   KEYS[i + 2] `<prefix>{<key>}:wait`   set while callers wait, so a release knows to PUBLISH
 * A release publishes on the channel `<prefix>{<key>}:rel`.
 * @internal
 */

/**
 * Take every key or none.
 * ARGV[1] token, ARGV[2] lease ms, ARGV[3] how long to flag waiters (ms, '0' = do not flag).
 * Returns {1, fence1, fence2, ...} when taken (also when the token already holds them, after a
 * lost reply), or {0, pttl} with the remaining lease of the first busy key.
 */
export const ACQUIRE_SCRIPT = `
for i = 1, #KEYS, 3 do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    -- Busy: leave a flag so the holder's release publishes a wake-up, then report the lease left.
    local flag = tonumber(ARGV[3])
    if flag > 0 and redis.call('PTTL', KEYS[i + 2]) < flag then
      redis.call('SET', KEYS[i + 2], '1', 'PX', flag)
    end
    return {0, redis.call('PTTL', KEYS[i])}
  end
end
local out = {1}
for i = 1, #KEYS, 3 do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  -- The fence is minted in the same round trip as the lock: no extra command per cycle.
  out[#out + 1] = redis.call('INCR', KEYS[i + 1])
end
return out
`;

/**
 * Renew the lease of every key, only if the token still holds all of them.
 * ARGV[1] token, ARGV[2] lease ms. Returns 1 when renewed, 0 when any key is lost.
 */
export const EXTEND_SCRIPT = `
for i = 1, #KEYS, 3 do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS, 3 do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
`;

/**
 * Delete the keys the token holds (compare-and-delete, never someone else's lock) and wake the
 * waiters of each freed key. ARGV[1] token.
 * Returns {keys released, keys whose waiters were notified}.
 */
export const RELEASE_SCRIPT = `
local released, notified = 0, 0
for i = 1, #KEYS, 3 do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    released = released + 1
    -- Publish only when someone waits: an uncontended release costs no PUBLISH.
    if redis.call('DEL', KEYS[i + 2]) == 1 then
      redis.call('PUBLISH', KEYS[i] .. ':rel', '1')
      notified = notified + 1
    end
  end
end
return {released, notified}
`;

/**
 * Hand a held lock straight to another caller of the same process, in one round trip instead of
 * a release plus an acquire; the new holder gets a new fence.
 * ARGV[1] old token, ARGV[2] new token, ARGV[3] new lease ms.
 * Returns {1, fence1, ...} or {0} when the old token no longer holds every key.
 */
export const HANDOFF_SCRIPT = `
for i = 1, #KEYS, 3 do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return {0} end
end
local out = {1}
for i = 1, #KEYS, 3 do
  redis.call('SET', KEYS[i], ARGV[2], 'PX', ARGV[3])
  out[#out + 1] = redis.call('INCR', KEYS[i + 1])
end
return out
`;

/**
 * Quorum only: raise each fence counter to at least the fence the holder was given, so the next
 * holder's fence is larger on every node of any majority. ARGV[n] is the fence of key n.
 */
export const RAISE_FENCE_SCRIPT = `
for i = 1, #KEYS, 3 do
  local want = tonumber(ARGV[(i + 2) / 3])
  if tonumber(redis.call('GET', KEYS[i + 1]) or '0') < want then
    redis.call('SET', KEYS[i + 1], want)
  end
end
return 1
`;
