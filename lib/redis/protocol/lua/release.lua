--[[
  RELEASE: give back the keys the token holds (compare-and-delete: never someone else's lock),
  each to its oldest queued waiter or to nobody; a shared hold (read or permit) gives back its
  share. Every release runs it; one key nobody waits for costs a GET and a DEL.
  KEYS: six per lock key (see key-set)
  ARGV[1] token, ARGV[2] '1' when a waiter gives up (also take the token out of the queue),
  ARGV[3] fences to reserve for an exclusive grant, ARGV[4] fence mode (see mint)
  Reply: the number of keys freed with a published wake-up (nobody queued, racing waiters told).
  What it granted, the grantees learn from their grant messages only.
]]
local token, leave, block, mode = ARGV[1], ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4]
-- One key nobody waits for: GET and one DEL, before any function below is defined. When the
-- DEL finds the wait flag too, the key is passed on below; a shared marker (a NUL byte first)
-- goes to the loop below.
local waited = false
if #KEYS == 6 and not leave then
  local lock, wait = KEYS[1], KEYS[3]
  local owner = redis.call('GET', lock)
  if owner == token then
    if redis.call('DEL', lock, wait) < 2 then return 0 end
    waited = true
  elseif not owner or string.byte(owner, 1) ~= 0 then
    return 0
  end
end
--- @include "includes/key-set"
--- @include "includes/pass-on"
--- @include "includes/grant-or-free"
--- @include "includes/release-shared"
--- @include "includes/after-leave"
if waited then
  return pass_on(key_set(1), block, mode) < 0 and 1 or 0
end
local published = 0
for i = 1, #KEYS, 6 do
  local k = key_set(i)
  local owner = redis.call('GET', k.lock)
  local r = nil
  if owner == token then
    r = grant_or_free(k, block, mode)
  elseif owner and string.byte(owner, 1) == 0 then
    r = release_shared(k, token, block, mode)
  end
  if r and r < 0 then published = published + 1 end
  if leave then
    local left = redis.call('ZREM', k.queue, token)
    redis.call('HDEL', k.meta, token)
    if left == 1 then after_leave(k, mode) end
  end
end
return published
