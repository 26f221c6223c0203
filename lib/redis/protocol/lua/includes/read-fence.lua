--- @include "includes/now-us"
-- A reader's fence: the counter as it is (>= the last writer's fence, < the next one); with no
-- counter, the server's clock, where the next one will start (see mint).
local function read_fence(fence)
  local v = redis.call('GET', fence)
  if v then return tonumber(v) end
  return now_us()
end
