-- The lock's value while shared holders hold it: a NUL byte and the kind ('r' readers, N permits
-- of N), which no token can equal, so every exclusive script sees the key as busy or not its own.
local function marker_of(kind)
  return '\0' .. kind
end
