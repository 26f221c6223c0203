-- The process part of a token (its prefix before the separator): whose grant channel it is.
local function process_of(token)
  return string.match(token, '^(.*)%$TOKEN_SEPARATOR')
end
