-- The six keys of one lock key, from KEYS[i] on, in KeySpace's order: the lock (the holder's
-- token, or a shared marker), its fence counter, the wait flag, the queue (zset: token -> when
-- it queued, server us), the queue meta (hash: token -> "<lease ms>:<deadline ms>[:<kind>]")
-- and the shared holders (zset: token -> lease end, server ms).
local function key_set(i)
  return {
    lock = KEYS[i], fence = KEYS[i + 1], wait = KEYS[i + 2],
    queue = KEYS[i + 3], meta = KEYS[i + 4], holders = KEYS[i + 5],
  }
end
