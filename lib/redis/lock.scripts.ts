import {
  GRANT_CHANNEL_PREFIX,
  GRANT_WORD,
  RELEASE_CHANNEL_SUFFIX,
  RELEASED_MESSAGE,
  TOKEN_SEPARATOR,
  WRITER_WORD,
} from './key-space';

/**
 * The lock protocol, one atomic Lua script per step. Every script takes its keys in groups of
 * six per lock key, in the order `KeySpace` names them (TRY_SCRIPT, FREE_SCRIPT and
 * TAKE_ANY_SCRIPT take two of them), all sharing one Redis Cluster hash tag:
 *   KEYS[i]     the lock, value = the holder's token, with a PX lease
 *   KEYS[i + 1] the fencing counter (started from the server clock, lives a day)
 *   KEYS[i + 2] the wait flag, set while anyone waits (queued or racing): a release that finds
 *               it grants or publishes, one without it DELs
 *   KEYS[i + 3] waiting process heads in arrival order (zset)
 *   KEYS[i + 4] per queued token: "<lease ms>:<deadline ms>" (hash), with ":r" (a reader) or
 *               ":<N>" (a permit of N) appended for a shared waiter
 *   KEYS[i + 5] shared holders (zset): token -> lease end (server ms), while the lock holds a
 *               shared marker instead of a token (see SHARED below)
 * A release publishes `r` on the key's release channel when racing waiters wait for a free key,
 * and a grant `g <token> <fence> <spare> <lock key>` on the grant channel of the process that
 * queued the token (channel names and message words: `key-space.ts`).
 *
 * Fences are minted in blocks: a script that gives the key to a process adds `block` to the
 * counter and hands out the first fence of the block; the `spare` ones after it are for the
 * callers of that process it hands the key to next without a round trip. Fences stay strictly
 * increasing across every holder, not consecutive.
 *
 * Single-node groups queue (fair, FIFO across processes, the lock granted by the release itself
 * with no extra round trip); quorum groups race (each node would order its queue differently).
 * Shared holds (read locks, permits: see SHARED, ACQUIRE_SHARED_SCRIPT, EXTEND_SHARED_SCRIPT) put
 * a marker in the lock key and their tokens in KEYS[i + 5]; the exclusive scripts see the marker
 * as a busy key (TRY, FREE and the fast paths of ACQUIRE and RELEASE are unchanged).
 * The uncontended cycle (a first try, a release nobody waits for) runs TRY_SCRIPT and
 * FREE_SCRIPT: the least Lua, the fewest keys.
 * @internal
 */

/**
 * How long a fence counter lives: a day after it was set (on a single node, set at every fence;
 * on a quorum, when it was created). When it is gone (expired, evicted, lost in a restart without
 * persistence, or not yet on a promoted replica), the next fence starts again from the server's
 * clock, which is above every fence handed out before (see MINT): so idle keys leave nothing
 * behind for good, and fences never go backwards.
 */
export const FENCE_COUNTER_LIFETIME_MS = 24 * 60 * 60 * 1000;

/**
 * How long a key granted to a queued waiter is set for until the waiter's process claims it
 * (renews it to its full lease on receipt of the grant).
 */
export const GRANT_CLAIM_MS = 1_000;

/**
 * How many queue entries ahead of the waiter a permit passes to PASS_SHARE looks at to tell
 * whether the pass goes past a waiter of another process. The waiter is its process's oldest,
 * so the entries ahead of it are usually none, or other processes' only.
 */
export const PASS_SCAN = 16;

/**
 * The spare count a release's answer gives a read share it granted when the run of readers it
 * granted stopped at a queued writer: their processes must let no later reader join those
 * shares (the writer queued before such a reader; the `w` notice that says so too is on its way
 * on the grant channel).
 */
export const WRITER_BEHIND = -1;

/**
 * Shared Lua: the server's clock (`now_us`, `now_ms`: `TIME` in microseconds, milliseconds) and
 * `mint`, which reserves `block` fences for the lock at KEYS[l] and returns the first. A missing
 * counter starts at the server's clock in microseconds (`TIME`), so a new counter is larger than
 * any fence an earlier one gave, as long as the clock did not go back and a key mints fewer than
 * one fence per microsecond on average (a lock round trip takes far longer). A negative `block`
 * (single-node groups: a primary that can fail over to a replica whose counter is behind) keeps
 * every fence at or above the clock too, not only a new counter's. Fences stay below 2^53 (safe
 * JavaScript integers) until the year 2255.
 */
const MINT = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function mint(l, block)
  if block < 0 then
    block = -block
    local v = math.max(tonumber(redis.call('GET', KEYS[l + 1]) or '0'), now_us()) + block
    redis.call('SET', KEYS[l + 1], string.format('%.0f', v), 'PX', ${FENCE_COUNTER_LIFETIME_MS})
    return v - block + 1
  end
  local v = redis.call('INCRBY', KEYS[l + 1], block)
  if v == block then
    v = now_us() + block
    redis.call('SET', KEYS[l + 1], string.format('%.0f', v), 'PX', ${FENCE_COUNTER_LIFETIME_MS})
  end
  return v - block + 1
end`;

/**
 * Shared Lua: whether one of `tokens` (entries of the queue at KEYS[4], meta at KEYS[5]) is a
 * live waiter (deadline not passed at `now`, server ms) of another process than the one of
 * `token` (processes told apart by the token's prefix).
 */
const OTHER_WAITER = `
local function other_waiter(tokens, token, now)
  local mine = string.match(token, '^(.*)%${TOKEN_SEPARATOR}')
  for _, t in ipairs(tokens) do
    if string.match(t, '^(.*)%${TOKEN_SEPARATOR}') ~= mine then
      local meta = redis.call('HGET', KEYS[5], t)
      local deadline = meta and tonumber(string.match(meta, '^[^:]*:([^:]*)'))
      if deadline and deadline > now then return true end
    end
  end
  return false
end`;

/**
 * Shared Lua of shared holds (read locks and permits), part of GRANT_OR_FREE: while shared
 * holders exist the lock key holds a marker, a NUL byte and the kind ('\0r' readers, '\0<N>'
 * permits of N), which no token can equal, so every exclusive script sees the key as busy or not
 * its own; KEYS[l + 5] maps each holder's token to its lease end (server ms), and the marker and
 * the zset live as long as the longest lease. Needs MINT (now_ms) and entry defined before it.
 */
const SHARED = `
-- Grants made by this script (shares and locks): token, fence, spare fences, ... (RELEASE
-- returns them to the releaser, whose process may be the grantee's: it then holds from the
-- answer, without waiting for the grant message).
local granted_shares = {}
local function marker_of(kind) return '\\0' .. kind end
local function room_of(kind)
  if kind == 'r' then return math.huge end
  return tonumber(kind)
end
-- A reader's fence: the counter as it is (>= the last writer's fence, < the next one).
local function read_fence(l)
  local v = redis.call('GET', KEYS[l + 1])
  if v then return tonumber(v) end
  return now_us()
end
-- The marker and the zset live as long as the longest lease; false when no holder is left.
local function sync(l, now)
  local top = redis.call('ZRANGE', KEYS[l + 5], -1, -1, 'WITHSCORES')
  if #top == 0 then return false end
  local ms = math.max(1, tonumber(top[2]) - now)
  redis.call('PEXPIRE', KEYS[l], ms)
  redis.call('PEXPIRE', KEYS[l + 5], ms)
  return true
end
-- One queued shared waiter gets its share for the claim window, and is told, with the server's
-- clock (ms, \`now\`) read before the window was set (as an exclusive grant: see pass_on).
local function grant_one(l, token, ttl, kind, now, block)
  local claim = math.min(tonumber(ttl), ${GRANT_CLAIM_MS})
  redis.call('ZADD', KEYS[l + 5], now + claim, token)
  if redis.call('PTTL', KEYS[l]) < claim then redis.call('PEXPIRE', KEYS[l], claim) end
  if redis.call('PTTL', KEYS[l + 5]) < claim then redis.call('PEXPIRE', KEYS[l + 5], claim) end
  local fence
  if kind == 'r' then fence = read_fence(l) else fence = mint(l, block < 0 and -1 or 1) end
  redis.call('PUBLISH', '${GRANT_CHANNEL_PREFIX}' .. string.match(token, '^(.*)%${TOKEN_SEPARATOR}'),
    '${GRANT_WORD} ' .. token .. ' ' .. string.format('%.0f', fence) .. ' 0:'
    .. string.format('%.0f', now) .. ' ' .. KEYS[l])
  granted_shares[#granted_shares + 1] = token
  granted_shares[#granted_shares + 1] = string.format('%.0f', fence)
  granted_shares[#granted_shares + 1] = 0
  return fence
end
-- A writer waits for a key readers hold: each holder's process is told ('w <lock key>' on its
-- grant channel, once per process), so its later readers stop joining the share it holds and
-- queue behind the writer instead.
local function tell_readers(l)
  local told = {}
  for _, t in ipairs(redis.call('ZRANGE', KEYS[l + 5], 0, -1)) do
    local channel = '${GRANT_CHANNEL_PREFIX}' .. string.match(t, '^(.*)%${TOKEN_SEPARATOR}')
    if not told[channel] then
      told[channel] = true
      redis.call('PUBLISH', channel, '${WRITER_WORD} ' .. KEYS[l])
    end
  end
end
-- Grants the queued shared waiters of kind at the head of the queue, up to room of them (a
-- waiter of another kind stops the run: a writer is not overtaken). The first fence, or 0.
local function grant_room(l, kind, room, block)
  local first, now = 0, now_ms()
  local from = #granted_shares
  while room > 0 do
    local head = redis.call('ZRANGE', KEYS[l + 3], 0, 0)
    if #head == 0 then break end
    local token = head[1]
    local meta = redis.call('HGET', KEYS[l + 4], token)
    local ttl, deadline, k = nil, 0, nil
    if meta then ttl, deadline, k = entry(meta) end
    if deadline > now and k ~= kind then
      if kind == 'r' then
        -- A writer queued behind the readers: none of their processes lets a later reader join
        -- (the grants answered to the releaser say so; the others hear it after their grant).
        for j = from + 3, #granted_shares, 3 do granted_shares[j] = ${WRITER_BEHIND} end
        tell_readers(l)
      end
      break
    end
    redis.call('ZREM', KEYS[l + 3], token)
    redis.call('HDEL', KEYS[l + 4], token)
    if deadline > now then
      local fence = grant_one(l, token, ttl, kind, now, block)
      if first == 0 then first = fence end
      room = room - 1
    end
  end
  return first
end
`;

/**
 * Shared Lua: free the lock at KEYS[l] (which the caller holds): grant it to the oldest queued
 * token whose deadline has not passed, or delete it and wake the racing waiters. The wait flag
 * is set whenever anyone waits (queued or racing), so with nobody waiting this is one DEL.
 * Returns the fence of a grant (> 0), 0 when the key was freed, -1 when freed and published.
 * `pass_on` is its second half, for a script that did the DEL itself on its fast path.
 * Needs MINT defined before it.
 */
const GRANT_OR_FREE = `
local function flag(l, ms)
  local left = redis.call('PTTL', KEYS[l + 2])
  if left < ms then
    redis.call('SET', KEYS[l + 2], '1', 'PX', ms)
  elseif redis.call('GET', KEYS[l + 2]) ~= '1' then
    -- A racing reader's flag ('r'): a writer (or a permit waiter) waits now.
    redis.call('SET', KEYS[l + 2], '1', 'PX', left)
  end
end
-- A racing reader waits (quorum groups): flagged 'r' unless a writer's '1' is there, so later
-- readers can tell a waiting writer (whom they do not overtake) from waiting readers.
local function reader_flag(l, ms)
  local left = redis.call('PTTL', KEYS[l + 2])
  if left == -2 then
    redis.call('SET', KEYS[l + 2], 'r', 'PX', ms)
  elseif left < ms then
    redis.call('PEXPIRE', KEYS[l + 2], ms)
  end
end
-- A queue entry: lease ms (string), deadline ms, and the kind of a shared waiter ('r' or N).
local function entry(meta)
  local a = string.find(meta, ':', 1, true)
  local b = string.find(meta, ':', a + 1, true)
  if b then
    return string.sub(meta, 1, a - 1), tonumber(string.sub(meta, a + 1, b - 1)), string.sub(meta, b + 1)
  end
  return string.sub(meta, 1, a - 1), tonumber(string.sub(meta, a + 1)), nil
end
${SHARED}
-- After the lock and its wait flag were deleted with the flag there (someone waits).
local function pass_on(l, block)
  local now = nil
  while true do
    local head = redis.call('ZRANGE', KEYS[l + 3], 0, 0)
    if #head == 0 then break end
    local token = head[1]
    local meta = redis.call('HGET', KEYS[l + 4], token)
    now = now or now_ms()
    local ttl, deadline, kind = nil, 0, nil
    if meta then ttl, deadline, kind = entry(meta) end
    if kind and deadline > now then
      -- Shared waiters at the head: as many of them as the key admits, together.
      redis.call('SET', KEYS[l], marker_of(kind), 'PX', ${GRANT_CLAIM_MS})
      redis.call('DEL', KEYS[l + 5])
      local fence = grant_room(l, kind, room_of(kind), block)
      flag(l, math.max(redis.call('PTTL', KEYS[l + 3]), 1000))
      return fence
    end
    redis.call('ZREM', KEYS[l + 3], token)
    redis.call('HDEL', KEYS[l + 4], token)
    -- Skip waiters that gave up (or died): their deadline passed.
    if deadline > now then
      -- A claim, not the full lease: the waiter's process turns it into its lease when the
      -- grant reaches it, so a grant to a process that died costs the claim, not a ttl.
      redis.call('SET', KEYS[l], token, 'PX', math.min(tonumber(ttl), ${GRANT_CLAIM_MS}))
      local fence = mint(l, block)
      -- The others still queued (or racing) keep the flag, as long as the queue lives.
      flag(l, math.max(redis.call('PTTL', KEYS[l + 3]), 1000))
      -- Told to the waiter's process only, on its own channel (its token's prefix), with the
      -- server's clock (ms) read before the claim window was set: the window surely runs until
      -- that + the claim, so a waiter that can bound its clock against the server's may hold at
      -- once (the spare count and the time as '<spare>:<ms>': an older reader sees no spare).
      -- Fences are formatted whole: Lua's own number-to-text keeps only 14 digits.
      redis.call('PUBLISH', '${GRANT_CHANNEL_PREFIX}' .. string.match(token, '^(.*)%${TOKEN_SEPARATOR}'),
        '${GRANT_WORD} ' .. token .. ' ' .. string.format('%.0f', fence) .. ' '
        .. (math.abs(block) - 1) .. ':' .. string.format('%.0f', now) .. ' ' .. KEYS[l])
      granted_shares[#granted_shares + 1] = token
      granted_shares[#granted_shares + 1] = string.format('%.0f', fence)
      granted_shares[#granted_shares + 1] = math.abs(block) - 1
      return fence
    end
  end
  -- Nobody queued: wake the racing waiters.
  redis.call('PUBLISH', KEYS[l] .. '${RELEASE_CHANNEL_SUFFIX}', '${RELEASED_MESSAGE}')
  return -1
end
local function grant_or_free(l, block)
  -- Deletes the lock and the flag; 2 means the flag was there: someone waits.
  if redis.call('DEL', KEYS[l], KEYS[l + 2]) < 2 then return 0 end
  return pass_on(l, block)
end
-- A shared holder lets go (nil when the token held no share): the others hold on, a freed
-- permit goes to the next permit waiter, and the last one out frees the key as a writer would.
local function release_shared(l, token, block)
  if redis.call('ZREM', KEYS[l + 5], token) == 0 then return nil end
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[l + 5], '-inf', now)
  if not sync(l, now) then
    redis.call('DEL', KEYS[l + 5])
    if redis.call('ZCARD', KEYS[l + 3]) == 0 and redis.call('GET', KEYS[l + 2]) == '1' then
      -- A racing writer waits (quorum, several keys): the key frees with its flag kept, so the
      -- readers the release wakes too stay out of it until the writer had it.
      redis.call('DEL', KEYS[l])
      redis.call('PUBLISH', KEYS[l] .. '${RELEASE_CHANNEL_SUFFIX}', '${RELEASED_MESSAGE}')
      return -1
    end
    return grant_or_free(l, block)
  end
  local kind = string.sub(redis.call('GET', KEYS[l]), 2)
  if kind == 'r' then return 0 end
  local fence = grant_room(l, kind, room_of(kind) - redis.call('ZCARD', KEYS[l + 5]), block)
  if fence > 0 then return fence end
  -- Racing permit waiters (quorum groups) look again.
  if redis.call('EXISTS', KEYS[l + 2]) == 1 then
    redis.call('PUBLISH', KEYS[l] .. '${RELEASE_CHANNEL_SUFFIX}', '${RELEASED_MESSAGE}')
    return -1
  end
  return 0
end
-- A waiter left the queue: shared waiters it held up may fit now.
local function after_leave(l, block)
  local owner = redis.call('GET', KEYS[l])
  if not owner or string.byte(owner, 1) ~= 0 then return end
  redis.call('ZREMRANGEBYSCORE', KEYS[l + 5], '-inf', now_ms())
  local kind = string.sub(owner, 2)
  grant_room(l, kind, room_of(kind) - redis.call('ZCARD', KEYS[l + 5]), block)
end
local function enqueue(l, token, ttl, wait_ms, kind)
  local us = now_us()
  local now = math.floor(us / 1000)
  -- Ordered by the server's clock in microseconds: members with the same score come out by
  -- their bytes (by token), so a score in ms would reorder the waiters of one millisecond.
  redis.call('ZADD', KEYS[l + 3], 'NX', us, token)
  local meta = ttl .. ':' .. (now + wait_ms)
  if kind then meta = meta .. ':' .. kind end
  redis.call('HSET', KEYS[l + 4], token, meta)
  -- The queue disappears by itself once every waiter's deadline has passed.
  local keep = wait_ms + 1000
  if redis.call('PTTL', KEYS[l + 3]) < keep then
    redis.call('PEXPIRE', KEYS[l + 3], keep)
    redis.call('PEXPIRE', KEYS[l + 4], keep)
  end
  flag(l, keep)
  local owner = redis.call('GET', KEYS[l])
  if not kind and owner == marker_of('r') then
    -- A writer queued behind readers: their processes let no later reader join their shares.
    tell_readers(l)
  elseif owner and string.byte(owner, 1) ~= 0 then
    -- Tells the holder's process (a token's) that a waiter of another process queued: it passes
    -- the key to its own callers past localHandoffs only while nobody else waits.
    local holder = string.match(owner, '^(.*)%${TOKEN_SEPARATOR}')
    if holder and holder ~= string.match(token, '^(.*)%${TOKEN_SEPARATOR}') then
      redis.call('PUBLISH', '${GRANT_CHANNEL_PREFIX}' .. holder, '${WRITER_WORD} ' .. KEYS[l])
    end
  end
end
`;

/**
 * Take every key or none.
 * ARGV[1] token, ARGV[2] lease ms, ARGV[3] how long this caller will wait (ms; '0' = one try),
 * ARGV[4] '1' to queue for a grant (single key, single node), '0' to race (flag the key),
 * ARGV[5] fences to reserve per key (the first is the holder's).
 * Returns {1, fence1, fence2, ...} when taken (also when the token already holds them: a grant
 * whose message was lost, or a lost reply), or {0, pttl} with the remaining lease of the first
 * busy key.
 */
export const ACQUIRE_SCRIPT = `${MINT}
-- One key, free: a single SET NX (the uncontended path), first, before the other shared
-- functions below are even defined: the common case runs the least Lua.
if #KEYS == 6 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- The fence is minted in the same round trip as the lock: no extra command per cycle.
  local fence = mint(1, tonumber(ARGV[5]))
  -- A waiter that queued earlier leaves the queue (a first try never queued).
  if ARGV[4] == '1' and ARGV[3] ~= '0' and redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then
    redis.call('HDEL', KEYS[5], ARGV[1])
  end
  return {1, fence}
end
${GRANT_OR_FREE}
local block = tonumber(ARGV[5])
local function taken()
  local out = {1}
  for i = 1, #KEYS, 6 do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
    out[#out + 1] = mint(i, block)
    -- A waiter that queued earlier leaves the queue (a first try never queued).
    if ARGV[4] == '1' and ARGV[3] ~= '0' and redis.call('ZREM', KEYS[i + 3], ARGV[1]) == 1 then
      redis.call('HDEL', KEYS[i + 4], ARGV[1])
    end
  end
  return out
end
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= ARGV[1] then
    local wait_ms = tonumber(ARGV[3])
    if wait_ms > 0 then
      if ARGV[4] == '1' then
        enqueue(i, ARGV[1], ARGV[2], wait_ms)
      else
        flag(i, wait_ms)
        if owner == marker_of('r') then tell_readers(i) end
      end
    end
    return {0, redis.call('PTTL', KEYS[i])}
  end
end
return taken()
`;

/**
 * A caller's first try for one key (it neither queues nor flags: it does not wait yet), with
 * only the keys that needs: KEYS[1] the lock, KEYS[2] its fence counter. Every key declared and
 * little Lua run: the uncontended acquire costs Redis barely more than a plain SET NX.
 * ARGV[1] token, ARGV[2] lease ms, ARGV[3] fences to reserve.
 * Returns {1, fence} when taken, {0, pttl} with the holder's remaining lease.
 */
export const TRY_SCRIPT = `${MINT}
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, mint(1, tonumber(ARGV[3]))}
end
return {0, redis.call('PTTL', KEYS[1])}
`;

/**
 * Release of one key with only the keys the common case needs: KEYS[1] the lock, KEYS[2] its
 * wait flag. ARGV[1] token; ARGV[2] '1' when waiters may be queued for a grant (single node):
 * then a flagged key is left alone for RELEASE_SCRIPT, which can grant it.
 * Returns 0 not ours, 1 freed, 2 someone waits (nothing done: run RELEASE_SCRIPT), 3 freed with
 * the racing waiters woken (`r` on the key's channel).
 */
export const FREE_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('DEL', KEYS[1], KEYS[2]) == 2 then
  redis.call('PUBLISH', KEYS[1] .. '${RELEASE_CHANNEL_SUFFIX}', '${RELEASED_MESSAGE}')
  return 3
end
return 1
`;

/**
 * Segmented sweep in one round trip (single node): take the first free key of the candidates,
 * in the order given. A sweep only takes free keys, so it needs two keys per candidate, the lock
 * and its fence counter. ARGV[1] token, ARGV[2] lease ms, ARGV[3] fences to reserve.
 * Returns {1, candidate number (1-based), fence} or {0, shortest lease left among them}.
 */
export const TAKE_ANY_SCRIPT = `${MINT}
local shortest = -1
for i = 1, #KEYS, 2 do
  if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return {1, (i + 1) / 2, mint(i, tonumber(ARGV[3]))}
  end
  local left = redis.call('PTTL', KEYS[i])
  if shortest < 0 or left < shortest then shortest = left end
end
return {0, shortest}
`;

/**
 * Renew the lease of every key, only if the token still holds all of them. ARGV[1] token,
 * ARGV[2] lease ms, ARGV[3] '1' to put the lock back on keys that are missing (quorum repair: a
 * node that restarted empty, while the holder keeps a majority elsewhere; the caller gives a
 * repair back when the majority is not there).
 * Returns 1 renewed, 2 renewed with missing keys put back, 0 lost (a key held by another token,
 * or missing with no repair asked).
 */
export const EXTEND_SCRIPT = `
local missing = 0
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  if not owner then
    if ARGV[3] ~= '1' then return 0 end
    missing = missing + 1
  elseif owner ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS, 6 do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
if missing > 0 then return 2 end
return 1
`;

/**
 * Give back the keys the token holds (compare-and-delete: never someone else's lock), each to
 * its oldest queued waiter or to nobody; a shared hold (read or permit) gives back its share. ARGV[1] token; ARGV[2] '1' when a waiter gives up: also
 * take the token out of the queue; ARGV[3] fences to reserve for a grant.
 * Returns {keys released, keys granted to a queued waiter, keys freed with a published wake-up}.
 */
export const RELEASE_SCRIPT = `
-- One key nobody waits for (the uncontended path): GET and one DEL, before the shared functions
-- below are defined. When the DEL finds the wait flag too, the key is passed on below; a shared
-- marker (a NUL byte first) goes to the loop below.
local waited = false
if #KEYS == 6 and ARGV[2] ~= '1' then
  local owner = redis.call('GET', KEYS[1])
  if owner == ARGV[1] then
    if redis.call('DEL', KEYS[1], KEYS[3]) < 2 then return {1, 0, 0} end
    waited = true
  elseif not owner or string.byte(owner, 1) ~= 0 then
    return {0, 0, 0}
  end
end
${MINT}
${GRANT_OR_FREE}
if waited then
  local r = pass_on(1, tonumber(ARGV[3]))
  return {1, r > 0 and 1 or 0, r < 0 and 1 or 0}
end
local released, granted, published = 0, 0, 0
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  local r = nil
  if owner == ARGV[1] then
    r = grant_or_free(i, tonumber(ARGV[3]))
  elseif owner and string.byte(owner, 1) == 0 then
    r = release_shared(i, ARGV[1], tonumber(ARGV[3]))
  end
  if r then
    released = released + 1
    if r > 0 then granted = granted + 1 elseif r < 0 then published = published + 1 end
  end
  if ARGV[2] == '1' then
    local left = redis.call('ZREM', KEYS[i + 3], ARGV[1])
    redis.call('HDEL', KEYS[i + 4], ARGV[1])
    if left == 1 then after_leave(i, tonumber(ARGV[3])) end
  end
end
local out = {released, granted, published}
for _, v in ipairs(granted_shares) do out[#out + 1] = v end
return out
`;

/**
 * Release one key that has local waiters: grant it to the oldest waiter queued by another
 * process and queue our own next waiter behind them; with nobody queued, hand it straight to our
 * own next waiter. ARGV[1] token, ARGV[2] next local token, ARGV[3] its lease ms, ARGV[4] its
 * remaining wait ms, ARGV[5] fences to reserve.
 * Returns {0} not ours any more, {2, fence} granted to another process (ours queued),
 * {3, fence} handed to our next waiter.
 */
export const RELEASE_TO_SCRIPT = `${MINT}
${GRANT_OR_FREE}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
if redis.call('ZCARD', KEYS[4]) > 0 then
  redis.call('ZREM', KEYS[4], ARGV[2])
  redis.call('HDEL', KEYS[5], ARGV[2])
  local fence = grant_or_free(1, tonumber(ARGV[5]))
  if fence > 0 then
    enqueue(1, ARGV[2], ARGV[3], tonumber(ARGV[4]))
    return {2, fence}
  end
  -- Every queued waiter had given up: the key is free now; take it for ours.
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {3, mint(1, tonumber(ARGV[5]))}
`;

/**
 * Single node, while the process passes a held key from caller to caller in memory (the token in
 * Redis stays the same): reserve more fences for those handoffs ahead of need, so the next
 * callers get the key with no round trip. Only the holding token mints, so fences stay
 * increasing across every holder. The lease is left as it is (a renewal is the watchdog's, which
 * knows `maxHold`). ARGV[1] token, ARGV[2] fences to reserve.
 * Returns {0} not ours any more, or {1, first fence, 1 when a live waiter of another process is
 * queued else 0}.
 */
export const REFILL_SCRIPT = `${MINT}${OTHER_WAITER}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local fence = mint(1, tonumber(ARGV[2]))
local others = 0
local queued = redis.call('ZRANGE', KEYS[4], 0, 7)
if #queued > 0 and other_waiter(queued, ARGV[1], now_ms()) then others = 1 end
return {1, fence, others}
`;

/**
 * Hand a held lock straight to another caller of the same process, in one round trip instead of
 * a release plus an acquire; the new holder gets a new fence.
 * ARGV[1] old token, ARGV[2] new token, ARGV[3] new lease ms, ARGV[4] fences to reserve per key.
 * Returns {1, fence1, ...} or {0} when the old token no longer holds every key.
 */
export const HANDOFF_SCRIPT = `${MINT}
for i = 1, #KEYS, 6 do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return {0} end
end
local out = {1}
for i = 1, #KEYS, 6 do
  redis.call('SET', KEYS[i], ARGV[2], 'PX', ARGV[3])
  out[#out + 1] = mint(i, tonumber(ARGV[4]))
  -- The new holder may have queued for a grant before: it must not be granted the key again.
  if redis.call('ZREM', KEYS[i + 3], ARGV[2]) == 1 then
    redis.call('HDEL', KEYS[i + 4], ARGV[2])
  end
end
return out
`;

/**
 * Quorum only: raise each fence counter to at least the fence the holder was given, so the next
 * holder's fence is larger on every node of any majority. ARGV[n] is the fence of key n.
 */
export const RAISE_FENCE_SCRIPT = `
for i = 1, #KEYS, 6 do
  local want = ARGV[(i + 5) / 6]
  local have = redis.call('GET', KEYS[i + 1])
  if not have then
    redis.call('SET', KEYS[i + 1], want, 'PX', ${FENCE_COUNTER_LIFETIME_MS})
  elseif tonumber(have) < tonumber(want) then
    redis.call('SET', KEYS[i + 1], want, 'KEEPTTL')
  end
end
return 1
`;

/**
 * Release by expiry (`minHold`): leave every key the token still holds locked for ARGV[2] ms
 * more, then let Redis expire it, instead of deleting it now. Nothing is granted or published:
 * waiters learn of the expiry on their retry timer (the busy answer tells them the lease left).
 * A key that is no longer the token's is left alone. ARGV[1] token, ARGV[2] ms.
 * Returns the number of keys left to expire.
 */
export const LET_EXPIRE_SCRIPT = `
local kept = 0
for i = 1, #KEYS, 6 do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    kept = kept + 1
  end
end
return kept
`;

/**
 * Take a shared hold (read lock or permit) of every key, or none.
 * ARGV[1] token, ARGV[2] lease ms, ARGV[3] how long this caller will wait (ms; '0' = one try),
 * ARGV[4] '1' to queue for a grant (single key, single node), '0' to race (flag the key),
 * ARGV[5] kind: 'r' (read) or N (permits of N), ARGV[6] fences to reserve (permits),
 * ARGV[7] '1' on a single node: a live waiter queued ahead keeps the caller out (a writer or a
 * permit waiter; readers ahead of a reader join too), so a waiting writer is never overtaken.
 * Racing (quorum, several keys) readers stay out of a key readers hold, or that the last reader
 * freed, while a writer's wait flag ('1') is there (it lives until the writer's deadline at
 * most), and flag their own wait 'r'.
 * Returns {1, fence1, ...} (a reader's fence is the counter's value, a permit's a new one),
 * {0, ms} busy (ms until the first share may end), or {2, held} when the key is held as another
 * kind: 0 read, N permits of N.
 */
export const ACQUIRE_SHARED_SCRIPT = `${MINT}
${GRANT_OR_FREE}
local token, ttl, wait_ms, kind = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[5]
local block, queue, fair = tonumber(ARGV[6]), ARGV[4] == '1', ARGV[7] == '1'
local marker, room, now = marker_of(kind), room_of(kind), now_ms()
local function held_up(l)
  local rank = redis.call('ZRANK', KEYS[l + 3], token)
  if rank == 0 then return false end
  local ahead = redis.call('ZRANGE', KEYS[l + 3], 0, rank and rank - 1 or -1)
  for _, t in ipairs(ahead) do
    local meta = redis.call('HGET', KEYS[l + 4], t)
    local ttl_left, deadline, k = nil, 0, nil
    if meta then ttl_left, deadline, k = entry(meta) end
    if deadline > now then
      if kind ~= 'r' or k ~= 'r' then return true end
    else
      redis.call('ZREM', KEYS[l + 3], t)
      redis.call('HDEL', KEYS[l + 4], t)
    end
  end
  return false
end
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  local busy, mine = false, false
  if owner == marker then
    redis.call('ZREMRANGEBYSCORE', KEYS[i + 5], '-inf', now)
    mine = redis.call('ZSCORE', KEYS[i + 5], token) ~= false
    busy = not mine and redis.call('ZCARD', KEYS[i + 5]) >= room
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
      busy = held_up(i)
    elseif kind == 'r' and (owner == marker or not owner) then
      -- Racing (quorum, several keys): a waiting writer's flag keeps later readers out of a key
      -- readers hold, and out of the key the last of them freed.
      busy = redis.call('GET', KEYS[i + 2]) == '1'
    end
  end
  if busy then
    if wait_ms > 0 then
      if queue then
        enqueue(i, token, ARGV[2], wait_ms, kind)
      elseif kind == 'r' then
        reader_flag(i, wait_ms)
      else
        flag(i, wait_ms)
      end
    end
    local first = owner == marker and redis.call('ZRANGE', KEYS[i + 5], 0, 0, 'WITHSCORES') or {}
    if #first == 2 then return {0, math.max(0, tonumber(first[2]) - now)} end
    return {0, redis.call('PTTL', KEYS[i])}
  end
end
local out = {1}
for i = 1, #KEYS, 6 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('DEL', KEYS[i + 5])
    redis.call('SET', KEYS[i], marker, 'PX', ttl)
  end
  redis.call('ZADD', KEYS[i + 5], now + ttl, token)
  sync(i, now)
  if kind == 'r' then out[#out + 1] = read_fence(i) else out[#out + 1] = mint(i, block) end
  if redis.call('ZREM', KEYS[i + 3], token) == 1 then redis.call('HDEL', KEYS[i + 4], token) end
end
return out
`;

/**
 * Renew (or set, for a release by expiry) a shared hold of every key to ARGV[2] ms from now,
 * only if the token still holds a share of each (its lease not over). ARGV[1] token, ARGV[3] '1'
 * to put the share back where it is missing (quorum repair), ARGV[4] kind ('r' or N).
 * Returns 1 renewed, 2 renewed with missing shares put back, 0 lost.
 */
export const EXTEND_SHARED_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, ttl, marker = ARGV[1], tonumber(ARGV[2]), '\\0' .. ARGV[4]
local missing = 0
for i = 1, #KEYS, 6 do
  local owner = redis.call('GET', KEYS[i])
  if owner and owner ~= marker then return 0 end
  local ends = redis.call('ZSCORE', KEYS[i + 5], token)
  if not owner or not ends or tonumber(ends) <= now then
    if ARGV[3] ~= '1' then return 0 end
    missing = missing + 1
  end
end
for i = 1, #KEYS, 6 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('DEL', KEYS[i + 5])
    redis.call('SET', KEYS[i], marker, 'PX', ttl)
  end
  redis.call('ZADD', KEYS[i + 5], now + ttl, token)
  local top = redis.call('ZRANGE', KEYS[i + 5], -1, -1, 'WITHSCORES')
  local ms = math.max(1, tonumber(top[2]) - now)
  redis.call('PEXPIRE', KEYS[i], ms)
  redis.call('PEXPIRE', KEYS[i + 5], ms)
end
if missing > 0 then return 2 end
return 1
`;

/**
 * A permit passes from its holder to a waiter of the same process (single node, one key): the
 * holder's token keeps its share in the holders zset, renewed to the next holder's lease, and a
 * new fence is minted for it (permit fences are minted when the permit is taken, never reserved,
 * so a permit taken after another ended always has the larger one). The waiter's own queue entry
 * goes in the same step.
 * Also says whether the pass went past a live waiter of another process queued before the
 * waiter it went to (only such passes count toward `localHandoffs`): the entries ahead of the
 * waiter are looked at, at most PASS_SCAN of them (more, or a waiter not queued while others
 * are, counts as going past).
 * ARGV[1] holder token, ARGV[2] waiter token, ARGV[3] lease ms, ARGV[4] fences to reserve (1).
 * Returns {fence, 1 if it went past a waiter of another process else 0}, or {0, 0} when the
 * holder's share is gone (lost: nothing changed).
 */
export const PASS_SHARE_SCRIPT = `${MINT}${OTHER_WAITER}
local now = now_ms()
local ends = redis.call('ZSCORE', KEYS[6], ARGV[1])
if not ends or tonumber(ends) <= now or redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
local past = 0
local rank = redis.call('ZRANK', KEYS[4], ARGV[2])
if not rank then
  -- Not queued: anyone queued counts as gone past.
  if redis.call('ZCARD', KEYS[4]) > 0 then past = 1 end
elseif rank > ${PASS_SCAN} then
  -- Too many ahead to look at: counted as going past them.
  past = 1
elseif rank > 0 and other_waiter(redis.call('ZRANGE', KEYS[4], 0, rank - 1), ARGV[1], now) then
  past = 1
end
if redis.call('ZREM', KEYS[4], ARGV[2]) == 1 then redis.call('HDEL', KEYS[5], ARGV[2]) end
redis.call('ZADD', KEYS[6], now + tonumber(ARGV[3]), ARGV[1])
local top = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
local ms = math.max(1, tonumber(top[2]) - now)
if redis.call('PTTL', KEYS[1]) < ms then
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('PEXPIRE', KEYS[6], ms)
end
return {mint(1, tonumber(ARGV[4])), past}
`;
