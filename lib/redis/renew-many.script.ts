import { createHash } from 'node:crypto';
import type { ExtendReply, Script } from './scripts';

/**
 * Renews many holds in one call: for each hold, EXTEND's rule on its own lock keys. KEYS: the
 * lock keys of every hold, one after the other. ARGV[1] '1' on quorums (put a missing lock back,
 * as EXTEND does), then per hold: token, lease ms, how many of KEYS are its. Returns one code
 * per hold: 0 lost (a key missing without repair, or someone else's), 1 renewed, 2 repaired.
 * Every key of one call must hash to one slot on a Cluster (the batcher groups them so).
 */
export const RENEW_MANY_SCRIPT = `
local out = {}
local k = 0
local repair = ARGV[1] == '1'
for a = 2, #ARGV, 3 do
  local token, n = ARGV[a], tonumber(ARGV[a + 2])
  local code, missing = 1, 0
  for i = k + 1, k + n do
    local owner = redis.call('GET', KEYS[i])
    if not owner then
      if not repair then code = 0 break end
      missing = missing + 1
    elseif owner ~= token then
      code = 0
      break
    end
  end
  if code == 1 then
    for i = k + 1, k + n do
      redis.call('SET', KEYS[i], token, 'PX', ARGV[a + 1])
    end
    if missing > 0 then code = 2 end
  end
  out[#out + 1] = code
  k = k + n
end
return out
`;

const CODES: readonly ExtendReply[] = ['lost', 'renewed', 'repaired'];

/** `[repair, (token, lease ms, key count)...]` */
export type RenewManyArgs = readonly (string | number)[];

/** RENEW_MANY: one EXTEND answer per hold, in the order they were sent. @internal */
export const RENEW_MANY: Script<RenewManyArgs, ExtendReply[]> = {
  name: 'RENEW_MANY',
  lua: RENEW_MANY_SCRIPT,
  sha: createHash('sha1').update(RENEW_MANY_SCRIPT).digest('hex'),
  decode: (reply) => (reply as unknown[]).map((c) => CODES[Number(c)] ?? 'lost'),
};
