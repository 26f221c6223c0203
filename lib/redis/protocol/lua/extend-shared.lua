--[[
  EXTEND_SHARED: renew (or set, for a release by expiry) a shared hold of every key to ARGV[2]
  ms from now, only if the token still holds a share of each (its lease not over).
  KEYS: six per lock key (see key-set)
  ARGV[1] token, ARGV[2] lease ms, ARGV[3] '1' to put the share back where it is missing (quorum
  repair), ARGV[4] kind ('r' or N)
  Reply: 1 renewed, 2 renewed with missing shares put back, 0 lost.
]]
local token, ttl, repair, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4]
--- @include "includes/key-set"
--- @include "includes/now-ms"
--- @include "includes/marker-of"
--- @include "includes/hold-share"
local now, marker = now_ms(), marker_of(kind)
local missing = 0
for i = 1, #KEYS, 6 do
  local k = key_set(i)
  local owner = redis.call('GET', k.lock)
  if owner and owner ~= marker then return 0 end
  local ends = redis.call('ZSCORE', k.holders, token)
  if not owner or not ends or tonumber(ends) <= now then
    if not repair then return 0 end
    missing = missing + 1
  end
end
for i = 1, #KEYS, 6 do
  hold_share(key_set(i), token, marker, ttl, now)
end
if missing > 0 then return 2 end
return 1
