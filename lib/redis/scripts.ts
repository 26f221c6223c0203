import { createHash } from 'node:crypto';
import {
  ACQUIRE_SCRIPT,
  ACQUIRE_SHARED_SCRIPT,
  EXTEND_SCRIPT,
  EXTEND_SHARED_SCRIPT,
  FREE_SCRIPT,
  HANDOFF_SCRIPT,
  LET_EXPIRE_SCRIPT,
  PASS_SHARE_SCRIPT,
  RAISE_FENCE_SCRIPT,
  RELEASE_SCRIPT,
  RELEASE_TO_SCRIPT,
  REFILL_SCRIPT,
  TAKE_ANY_SCRIPT,
  TRY_SCRIPT,
} from './lock.scripts';

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

function defineScript<A extends ScriptArgs, R>(
  name: string,
  lua: string,
  decode: (reply: unknown) => R,
): Script<A, R> {
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

/**
 * A shared acquire's answer: also `conflict` when the key is held as another kind of shared
 * hold (`held`: 0 read, N permits of N).
 */
export type SharedReply = AcquireReply | { readonly kind: 'conflict'; readonly held: number };

/** How a shared hold is asked for in the scripts: `'r'` (read) or the number of permits. */
export type ShareArg = string;

/** What FREE did: not our lock, freed, left for RELEASE (someone waits), freed and published. */
export type FreeReply = 'notOurs' | 'freed' | 'waited' | 'published';
const FREE_REPLIES: readonly FreeReply[] = ['notOurs', 'freed', 'waited', 'published'];

/** What RELEASE did, counted in keys. */
export interface ReleaseReply {
  readonly released: number;
  readonly granted: number;
  readonly published: number;
  /** What the release granted (locks and shares), to queued waiters of any process. */
  readonly grants: readonly {
    readonly token: string;
    readonly fence: number;
    readonly spare: number;
  }[];
}

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
/** '1' to queue for a grant (single key, single node), '0' to race. */
type QueueMode = '0' | '1';
/** '1' when the token also leaves the Redis queue (a waiter giving up). */
type Leave = '0' | '1';

/** Single-key first try: `[token, lease ms, fences to reserve]`. KEYS: `KeySet.take`. */
export const TRY = defineScript<[Token, LeaseMs, Block], AcquireReply>(
  'TRY',
  TRY_SCRIPT,
  acquireReply,
);

/** `[token, lease ms, wait ms ('0' = one try), queue mode, fences to reserve per key]`. */
export const ACQUIRE = defineScript<[Token, LeaseMs, number, QueueMode, Block], AcquireReply>(
  'ACQUIRE',
  ACQUIRE_SCRIPT,
  acquireReply,
);

/** `[token, '1' when waiters may be queued for a grant]`. KEYS: `KeySet.free`. */
export const FREE = defineScript<[Token, '0' | '1'], FreeReply>(
  'FREE',
  FREE_SCRIPT,
  (r) => FREE_REPLIES[Number(r)] ?? 'notOurs',
);

/** `[token, leave, fences to reserve for a grant]`. */
export const RELEASE = defineScript<[Token, Leave, Block], ReleaseReply>(
  'RELEASE',
  RELEASE_SCRIPT,
  (reply) => {
    const r = reply as unknown[];
    const [released, granted, published] = numbers(r.slice(0, 3));
    const grants: { token: string; fence: number; spare: number }[] = [];
    for (let i = 3; i + 2 < r.length; i += 3) {
      grants.push({ token: String(r[i]), fence: Number(r[i + 1]), spare: Number(r[i + 2]) });
    }
    return { released, granted, published, grants };
  },
);

/** `[token, next local token, its lease ms, its remaining wait ms, fences to reserve]`. */
export const RELEASE_TO = defineScript<[Token, Token, LeaseMs, number, Block], ReleaseToReply>(
  'RELEASE_TO',
  RELEASE_TO_SCRIPT,
  (reply) => {
    const [code, fence] = numbers(reply);
    if (code === 2) return { kind: 'granted', fence };
    if (code === 3) return { kind: 'handed', fence };
    return { kind: 'notOurs' };
  },
);

/** `[old token, new token, new lease ms, fences to reserve per key]`. */
export const HANDOFF = defineScript<[Token, Token, LeaseMs, Block], HandoffReply>(
  'HANDOFF',
  HANDOFF_SCRIPT,
  (reply) => {
    const r = numbers(reply);
    return r[0] === 1 ? { kind: 'ok', fences: r.slice(1) } : { kind: 'notOurs' };
  },
);

/** `[token, fences to reserve]`. */
export const REFILL = defineScript<[Token, Block], RefillReply>(
  'REFILL',
  REFILL_SCRIPT,
  (reply) => {
    const [code, fence, others] = numbers(reply);
    return code === 1 ? { kind: 'ok', fence, othersQueued: others === 1 } : { kind: 'notOurs' };
  },
);

/** `[token, lease ms, fences to reserve]`. KEYS: `KeySet.take` of each candidate. */
export const TAKE_ANY = defineScript<[Token, LeaseMs, Block], TakeAnyReply>(
  'TAKE_ANY',
  TAKE_ANY_SCRIPT,
  (reply) => {
    const r = numbers(reply);
    if (r[0] !== 1) return { kind: 'busy', pttl: r[1] };
    return { kind: 'ok', index: r[1] - 1, fence: r[2] };
  },
);

/** What EXTEND found: still ours, put back where it was missing, or lost. */
export type ExtendReply = 'renewed' | 'repaired' | 'lost';
const EXTEND_REPLIES: readonly ExtendReply[] = ['lost', 'renewed', 'repaired'];

/** `[token, lease ms, '1' to put back missing keys]`. */
export const EXTEND = defineScript<[Token, LeaseMs, '0' | '1'], ExtendReply>(
  'EXTEND',
  EXTEND_SCRIPT,
  (r) => EXTEND_REPLIES[Number(r)] ?? 'lost',
);

/** The fence of each key, in order. */
export const RAISE_FENCE = defineScript<number[], void>(
  'RAISE_FENCE',
  RAISE_FENCE_SCRIPT,
  () => undefined,
);

/** `[token, ms until the keys expire]`: keys still the token's, left to expire. */
export const LET_EXPIRE = defineScript<[Token, number], number>(
  'LET_EXPIRE',
  LET_EXPIRE_SCRIPT,
  (r) => Number(r),
);

/**
 * `[token, lease ms, wait ms, queue mode, kind ('r' or N), fences to reserve, '1' on a single
 * node]`.
 */
export const ACQUIRE_SHARED = defineScript<
  [Token, LeaseMs, number, QueueMode, ShareArg, Block, '0' | '1'],
  SharedReply
>('ACQUIRE_SHARED', ACQUIRE_SHARED_SCRIPT, (reply) => {
  const r = reply as unknown[];
  if (Number(r[0]) === 2) return { kind: 'conflict', held: Number(r[1]) };
  return acquireReply(reply);
});

/** `[token, lease ms, '1' to put back missing shares, kind ('r' or N)]`. */
export const EXTEND_SHARED = defineScript<[Token, LeaseMs, '0' | '1', ShareArg], ExtendReply>(
  'EXTEND_SHARED',
  EXTEND_SHARED_SCRIPT,
  (r) => EXTEND_REPLIES[Number(r)] ?? 'lost',
);

/**
 * What PASS_SHARE did: the new fence (0: the share was lost), and whether it went past a waiter
 * of another process.
 */
export interface PassReply {
  readonly fence: number;
  readonly pastOthers: boolean;
}

/** `[holder token, waiter token, lease ms, fences to reserve]`. */
export const PASS_SHARE = defineScript<[Token, Token, LeaseMs, Block], PassReply>(
  'PASS_SHARE',
  PASS_SHARE_SCRIPT,
  (reply) => {
    const r = reply as unknown[];
    return { fence: Number(r[0]), pastOthers: Number(r[1]) === 1 };
  },
);
