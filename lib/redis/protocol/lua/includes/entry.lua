-- A queue entry's meta: lease ms (string), deadline ms, and the kind of a shared waiter ('r' or
-- N; nil for an exclusive one).
local function entry(meta)
  local a = string.find(meta, ':', 1, true)
  local b = string.find(meta, ':', a + 1, true)
  if b then
    local deadline = tonumber(string.sub(meta, a + 1, b - 1))
    return string.sub(meta, 1, a - 1), deadline, string.sub(meta, b + 1)
  end
  return string.sub(meta, 1, a - 1), tonumber(string.sub(meta, a + 1)), nil
end
