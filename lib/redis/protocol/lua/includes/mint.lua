--- @include "includes/now-us"
-- Reserves `block` fences of the counter `fence` and returns the first; the others are spare
-- ones of the same holder (handoffs in its process). Fences stay strictly increasing, not
-- consecutive, across every holder.
-- mode 'clock' (a single node): every fence is also above the server's clock, so a counter that
-- came back behind (a promoted replica that missed the latest writes, an old snapshot) cannot
-- make fences go back. mode 'count' (a quorum, whose nodes' clocks differ): it only counts.
-- A missing counter starts at the server's clock and lives $FENCE_COUNTER_LIFETIME_MS ms, not
-- renewed by use: by then the clock has passed every fence it gave (a key mints far fewer than
-- one fence per microsecond), so the counter seeded next starts above them all. Fences stay
-- below 2^53 until the year 2255.
local function mint(fence, block, mode)
  if mode == 'clock' then
    local old = redis.call('GET', fence)
    if old then
      old = tonumber(old)
      local now = now_us()
      -- Raised to the clock by its difference, an exact integer in any number format.
      local by = block
      if old < now then by = now - old + block end
      return redis.call('INCRBY', fence, by) - block + 1
    end
  else
    local v = redis.call('INCRBY', fence, block)
    if v > block then return v - block + 1 end
  end
  local v = now_us() + block
  -- Formatted whole: Lua's own number-to-text keeps only 14 digits.
  redis.call('SET', fence, string.format('%.0f', v), 'PX', $FENCE_COUNTER_LIFETIME_MS)
  return v - block + 1
end
