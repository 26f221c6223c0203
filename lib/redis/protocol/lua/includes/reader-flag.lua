-- A racing reader waits (quorum groups): flagged 'r' unless a writer's '1' is there, so later
-- readers can tell a waiting writer (whom they do not overtake) from waiting readers.
local function reader_flag(k, ms)
  local left = redis.call('PTTL', k.wait)
  if left == -2 then
    redis.call('SET', k.wait, 'r', 'PX', ms)
  elseif left < ms then
    redis.call('PEXPIRE', k.wait, ms)
  end
end
