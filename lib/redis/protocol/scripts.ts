import { createHash } from 'node:crypto';
import { PROTOCOL_WORDS } from './key-space';
import * as scriptConstants from './script-constants';
import { loadScript } from './script-loader';

/** What the scripts take from this side, as `$NAME` (see `script-loader.ts`). */
const CONSTANTS = { ...scriptConstants, ...PROTOCOL_WORDS };

/** One script's argument list, as sent. */
export type ScriptArgs = readonly (string | number)[];

/**
 * A Lua script with its SHA, the types of its arguments and a decoder of its reply into named
 * results (no reply is read by hand at a call site).
 * @internal
 */
export interface Script<A extends ScriptArgs, R> {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
  /** Declared for the arguments' types only (`A`); never read. */
  readonly args?: A;
  decode(reply: unknown): R;
}

/**
 * The script `name`, read from `lua/<file>.lua` with its includes and constants put in, once,
 * when this module loads (a broken script fails the import, never a lock call).
 */
function defineScript<A extends ScriptArgs, R>(
  name: string,
  file: string,
  decode: (reply: unknown) => R,
): Script<A, R> {
  const lua = loadScript(file, CONSTANTS);
  return { name, lua, sha: createHash('sha1').update(lua).digest('hex'), decode };
}

const numbers = (reply: unknown): number[] => (reply as unknown[]).map(Number);

/** An acquire's answer on one node: taken with a fence per key, or busy. */
export type AcquireReply =
  | { readonly kind: 'ok'; readonly fences: number[] }
  | { readonly kind: 'busy'; readonly pttl: number };

/** `{1, fence...}` taken, `{0, pttl}` busy. */
function acquireReply(reply: unknown): AcquireReply {
  const r = reply as unknown[];
  if (Number(r[0]) !== 1) return { kind: 'busy', pttl: Number(r[1]) };
  const fences = new Array<number>(r.length - 1);
  for (let i = 1; i < r.length; i++) fences[i - 1] = Number(r[i]);
  return { kind: 'ok', fences };
}

/** TRY's reply: the fence (a number) when taken, `{pttl}` busy. */
function tryReply(reply: unknown): AcquireReply {
  if (Array.isArray(reply)) return { kind: 'busy', pttl: Number(reply[0]) };
  return { kind: 'ok', fences: [Number(reply)] };
}

/**
 * A shared acquire's answer: also `conflict` when the key is held as another kind of shared
 * hold (`held`: 0 read, N permits of N).
 */
export type SharedReply = AcquireReply | { readonly kind: 'conflict'; readonly held: number };

/** How a shared hold is asked for in the scripts: `'r'` (read) or the number of permits. */
export type ShareArg = string;

/** What RELEASE_TO did with a key that has a local waiter. */
export type ReleaseToReply =
  | { readonly kind: 'notOurs' }
  | { readonly kind: 'granted'; readonly fence: number }
  | { readonly kind: 'handed'; readonly fence: number };

/** HANDOFF: the new holder's fences, or the old token held the keys no more. */
export type HandoffReply = { readonly kind: 'ok'; readonly fences: number[] } | { kind: 'notOurs' };

/** REFILL: the first fence of the new block, and whether a waiter of another process is queued. */
export type RefillReply =
  | { readonly kind: 'ok'; readonly fence: number; readonly othersQueued: boolean }
  | { readonly kind: 'notOurs' };

/** TAKE_ANY: the candidate taken (0-based) and its fence, or the shortest lease left. */
export type TakeAnyReply =
  | { readonly kind: 'ok'; readonly index: number; readonly fence: number }
  | { readonly kind: 'busy'; readonly pttl: number };

type Token = string;
type LeaseMs = number;
type Block = number;
/**
 * How a script mints fences (see `lua/includes/mint.lua`): `clock` on a single node (every fence
 * also above the server's clock, so a counter that came back behind cannot make fences go back),
 * `count` on a quorum (its nodes' clocks differ).
 */
export type FenceMode = 'clock' | 'count';
/** '1' to queue for a grant (single key, single node), '0' to race. */
type QueueMode = '0' | '1';
/** '1' when the token also leaves the Redis queue (a waiter giving up). */
type Leave = '0' | '1';

/** Single-key first try: `[token, lease ms, fences to reserve, fence mode]`; KEYS `KeySet.take`. */
export const TRY = defineScript<[Token, LeaseMs, Block, FenceMode], AcquireReply>(
  'TRY',
  'try',
  tryReply,
);

/**
 * `[token, lease ms, wait ms ('0' = one try), queue mode, fences to reserve per key, fence
 * mode]`.
 */
export const ACQUIRE = defineScript<
  [Token, LeaseMs, number, QueueMode, Block, FenceMode],
  AcquireReply
>('ACQUIRE', 'acquire', acquireReply);

/**
 * `[token, leave, fences to reserve for a grant, fence mode]`. Its reply: how many keys it freed
 * with a published wake-up (nobody queued, racing waiters told).
 */
export const RELEASE = defineScript<[Token, Leave, Block, FenceMode], number>(
  'RELEASE',
  'release',
  Number,
);

/**
 * `[token, fences to reserve for a grant, fence mode]`, KEYS one `KeySet.all`: the lock board's
 * force release of a key from the token read just before. Its reply: 1 freed, 0 not that token's.
 */
export const FORCE_RELEASE = defineScript<[Token, Block, FenceMode], number>(
  'FORCE_RELEASE',
  'force-release',
  Number,
);

/**
 * `[token, next local token, its lease ms, its remaining wait ms, fences to reserve, fence
 * mode]`.
 */
export const RELEASE_TO = defineScript<
  [Token, Token, LeaseMs, number, Block, FenceMode],
  ReleaseToReply
>('RELEASE_TO', 'release-to', (reply) => {
  const [code, fence] = numbers(reply);
  if (code === 2) return { kind: 'granted', fence };
  if (code === 3) return { kind: 'handed', fence };
  return { kind: 'notOurs' };
});

/** `[old token, new token, new lease ms, fences to reserve per key, fence mode]`. */
export const HANDOFF = defineScript<[Token, Token, LeaseMs, Block, FenceMode], HandoffReply>(
  'HANDOFF',
  'handoff',
  (reply) => {
    const r = numbers(reply);
    return r[0] === 1 ? { kind: 'ok', fences: r.slice(1) } : { kind: 'notOurs' };
  },
);

/** `[token, fences to reserve, fence mode]`. */
export const REFILL = defineScript<[Token, Block, FenceMode], RefillReply>(
  'REFILL',
  'refill',
  (reply) => {
    const [code, fence, others] = numbers(reply);
    return code === 1 ? { kind: 'ok', fence, othersQueued: others === 1 } : { kind: 'notOurs' };
  },
);

/** `[token, lease ms, fences to reserve, fence mode]`. KEYS: `KeySet.take` of each candidate. */
export const TAKE_ANY = defineScript<[Token, LeaseMs, Block, FenceMode], TakeAnyReply>(
  'TAKE_ANY',
  'take-any',
  (reply) => {
    const r = numbers(reply);
    if (r[0] !== 1) return { kind: 'busy', pttl: r[1] };
    return { kind: 'ok', index: r[1] - 1, fence: r[2] };
  },
);

/** What EXTEND found: still ours, put back where it was missing, or lost. */
export type ExtendReply = 'renewed' | 'repaired' | 'lost';
const EXTEND_REPLIES: readonly ExtendReply[] = ['lost', 'renewed', 'repaired'];
const extendReply = (r: unknown): ExtendReply => EXTEND_REPLIES[Number(r)] ?? 'lost';

/** `[token, lease ms, '1' to put back missing keys]`. */
export const EXTEND = defineScript<[Token, LeaseMs, '0' | '1'], ExtendReply>(
  'EXTEND',
  'extend',
  extendReply,
);

/**
 * `[token, lease ms]`: the key's fence counter when it was the token's (renewed to the lease),
 * false when not.
 */
export const CLAIM = defineScript<[Token, LeaseMs], number | false>('CLAIM', 'claim', (r) =>
  // An integer 0: not the token's; a counter (a string, exact below 2^53), '0' when missing.
  typeof r === 'string' ? Number(r) : false,
);

/** The fence of each key, in order. */
export const RAISE_FENCE = defineScript<number[], void>(
  'RAISE_FENCE',
  'raise-fence',
  () => undefined,
);

/** `[token, ms until the keys expire]`: keys still the token's, left to expire. */
export const LET_EXPIRE = defineScript<[Token, number], number>('LET_EXPIRE', 'let-expire', (r) =>
  Number(r),
);

/**
 * `[token, lease ms, wait ms, queue mode, kind ('r' or N), fences to reserve, fence mode, '1' on
 * a single node]`.
 */
export const ACQUIRE_SHARED = defineScript<
  [Token, LeaseMs, number, QueueMode, ShareArg, Block, FenceMode, '0' | '1'],
  SharedReply
>('ACQUIRE_SHARED', 'acquire-shared', (reply) => {
  const r = reply as unknown[];
  if (Number(r[0]) === 2) return { kind: 'conflict', held: Number(r[1]) };
  return acquireReply(reply);
});

/** `[token, lease ms, '1' to put back missing shares, kind ('r' or N)]`. */
export const EXTEND_SHARED = defineScript<[Token, LeaseMs, '0' | '1', ShareArg], ExtendReply>(
  'EXTEND_SHARED',
  'extend-shared',
  extendReply,
);

/**
 * What PASS_SHARE did: the new fence (0: the share was lost), and whether it went past a waiter
 * of another process.
 */
export interface PassReply {
  readonly fence: number;
  readonly pastOthers: boolean;
}

/** `[holder token, waiter token, lease ms, fences to reserve, fence mode]`. */
export const PASS_SHARE = defineScript<[Token, Token, LeaseMs, Block, FenceMode], PassReply>(
  'PASS_SHARE',
  'pass-share',
  (reply) => {
    const r = reply as unknown[];
    return { fence: Number(r[0]), pastOthers: Number(r[1]) === 1 };
  },
);

/** `[repair, (token, lease ms, key count)...]` */
export type RenewManyArgs = readonly (string | number)[];

/** RENEW_MANY: one EXTEND answer per hold, in the order they were sent. */
export const RENEW_MANY = defineScript<RenewManyArgs, ExtendReply[]>(
  'RENEW_MANY',
  'renew-many',
  (reply) => (reply as unknown[]).map(extendReply),
);
