--[[
  ACQUIRE_SHARED: take a shared hold (read lock or permit) of every key, or none. Racing
  (quorum, several keys) readers stay out of a key readers hold, or that the last reader freed,
  while a writer's wait flag ('1') is there (it lives until the writer's deadline at most), and
  flag their own wait 'r'.
  KEYS: six per lock key (see key-set)
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] how long this caller will wait (ms; '0' = one try),
  ARGV[4] '1' to queue for a grant (single key, single node), '0' to race (flag the key),
  ARGV[5] kind: 'r' (read) or N (permits of N), ARGV[6] fences to reserve (permits),
  ARGV[7] fence mode (see mint), ARGV[8] '1' on a single node: a live waiter queued ahead keeps
  the caller out (a writer or a permit waiter; readers ahead of a reader join too), so a
  waiting writer is never overtaken
  Reply: {1, fence1, ...} (a reader's fence is the counter's value, a permit's a new one),
  {0, ms} busy (ms until the first share may end), or {2, held} when the key is held as another
  kind: 0 read, N permits of N.
]]
local token, ttl, wait_ms, queue = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local kind, block, mode, fair = ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8] == '1'
--- @include "includes/key-set"
--- @include "includes/now-ms"
--- @include "includes/mint"
--- @include "includes/read-fence"
--- @include "includes/marker-of"
--- @include "includes/room-of"
--- @include "includes/hold-share"
--- @include "includes/held-up"
--- @include "includes/enqueue"
--- @include "includes/flag"
--- @include "includes/reader-flag"
local marker, room, now = marker_of(kind), room_of(kind), now_ms()
for i = 1, #KEYS, 6 do
  local k = key_set(i)
  local owner = redis.call('GET', k.lock)
  local busy, mine = false, false
  if owner == marker then
    redis.call('ZREMRANGEBYSCORE', k.holders, '-inf', now)
    mine = redis.call('ZSCORE', k.holders, token) ~= false
    busy = not mine and redis.call('ZCARD', k.holders) >= room
  elseif owner then
    if string.byte(owner, 1) == 0 then
      local held = string.sub(owner, 2)
      if held == 'r' then return {2, 0} end
      return {2, tonumber(held)}
    end
    busy = true
  end
  if not busy and not mine then
    if fair then
      busy = held_up(k, token, kind, now)
    elseif kind == 'r' and (owner == marker or not owner) then
      -- Racing (quorum, several keys): a waiting writer's flag keeps later readers out of a key
      -- readers hold, and out of the key the last of them freed.
      busy = redis.call('GET', k.wait) == '1'
    end
  end
  if busy then
    if wait_ms > 0 then
      if queue then
        enqueue(k, token, ARGV[2], wait_ms, kind)
      elseif kind == 'r' then
        reader_flag(k, wait_ms)
      else
        flag(k, wait_ms)
      end
    end
    local first = owner == marker and redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES') or {}
    if #first == 2 then return {0, math.max(0, tonumber(first[2]) - now)} end
    return {0, redis.call('PTTL', k.lock)}
  end
end
local out = {1}
for i = 1, #KEYS, 6 do
  local k = key_set(i)
  hold_share(k, token, marker, ttl, now)
  if kind == 'r' then
    out[#out + 1] = read_fence(k.fence)
  else
    out[#out + 1] = mint(k.fence, block, mode)
  end
  if redis.call('ZREM', k.queue, token) == 1 then redis.call('HDEL', k.meta, token) end
end
return out
