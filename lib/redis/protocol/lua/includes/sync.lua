-- The shared marker and the holders zset of the key set k live as long as the longest lease
-- (server ms, `now`); false when no holder is left.
local function sync(k, now)
  local top = redis.call('ZRANGE', k.holders, -1, -1, 'WITHSCORES')
  if #top == 0 then return false end
  local ms = math.max(1, tonumber(top[2]) - now)
  redis.call('PEXPIRE', k.lock, ms)
  redis.call('PEXPIRE', k.holders, ms)
  return true
end
