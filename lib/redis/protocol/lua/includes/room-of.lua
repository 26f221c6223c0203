-- How many shared holders a kind admits: readers without bound, N permits.
local function room_of(kind)
  if kind == 'r' then return math.huge end
  return tonumber(kind)
end
