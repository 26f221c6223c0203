import type { LockNotifier } from './protocol/lock-notifier';
import type { LockProtocol, ReplicaAcks, Taken } from './protocol/lock-protocol';
import type { EnginePolicies } from './engine-policies';
import type { Grants } from './grants';
import type { KeyLine } from './key-line';
import type { KeyLines } from './key-lines';
import type { RedisLease, RedisTaker, RedisLeases } from './redis-lease';
import type { LockCounts } from '../core/lock-backend';
import type { HandoffEngine } from './local-handoffs';
import type { MultiKeyWaitContext } from './multi-key-wait';
import type { SharedHoldsEngine } from './shared-holds';
import type { Tokens } from './tokens';
import type { LineWaitContext, Waiter } from './waiter';
import { RESOLVED, type WakeUps } from './wake-ups';

/**
 * One engine's parts and own steps, as `RedisLockBackend` gives them once: what each of the parts it
 * coordinates (the waits, the local handoffs, the shared holds) is wired from here, each given
 * only what it needs.
 * @internal
 */
export interface EngineCore {
  readonly protocol: LockProtocol;
  readonly leases: RedisLeases;
  readonly tokens: Tokens;
  readonly notifier: LockNotifier;
  readonly stats: LockCounts;
  /** Single node: waiters queue in Redis and releases grant. */
  readonly fair: boolean;
  readonly localHandoffs: number;
  readonly policies: EnginePolicies;
  readonly lines: KeyLines<Waiter>;
  /** Aborted when the backend closes. */
  readonly closing: AbortSignal;
  readonly wakeUps: WakeUps;
  /** Where a grant goes: to its waiter, which claims it. */
  readonly grants: Grants;
  /** Whether the backend closed. */
  closed(): boolean;
  /** The lease a round took (a single key's line counts it as held). */
  hold(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease;
  /** A new acquisition's token, lease length and start. */
  taker(ttl: number, acks: ReplicaAcks | undefined): RedisTaker;
  leaseEnded(lease: RedisLease): void;
  holdReturned(lease: RedisLease, wakeHead: (line: KeyLine<Waiter>) => boolean): void;
  giveBack(lease: RedisLease): Promise<void>;
  release(lease: RedisLease): Promise<void>;
}

/** What every wait of one key in a line needs (see `Waiter`). @internal */
export function lineWaitContext(core: EngineCore): LineWaitContext {
  const { fair, wakeUps, grants } = core;
  return {
    ...waitContext(core),
    fair,
    // Single node: grants come on this group's own channel, nothing to subscribe per key.
    // Quorum: heads race, woken by the key's release channel.
    listen: (line) => {
      if (fair) return wakeUps.subscribed();
      if (line.hearsReleases) return RESOLVED;
      return wakeUps.soon(line.listen(() => wakeUps.onReleases(line.key, () => line.head?.wake())));
    },
    holds: (token) => core.tokens.holds(token),
    undoing: (token) => core.protocol.undoing(token),
    claim: (keys, taker, grant) => grants.claim(keys, taker, grant),
    dropIfIdle: (line) => core.lines.dropIfIdle(line),
  };
}

/** What every wait of several keys, or shared, needs (see `waitForKeys`). @internal */
export function keysWaitContext(core: EngineCore): MultiKeyWaitContext {
  return {
    ...waitContext(core),
    watch: (keys, onRelease) => core.wakeUps.watch(keys, onRelease),
  };
}

/** What every wait needs, single key or several. */
function waitContext(
  core: EngineCore,
): Pick<LineWaitContext, 'closing' | 'attempt' | 'hold' | 'abandon' | 'timerWakeup'> {
  const { protocol } = core;
  return {
    closing: core.closing,
    attempt: (keys, taker, waitMs) =>
      protocol.attempt(keys, taker.token, taker.ttl, waitMs, undefined, taker.acks),
    hold: (keys, taker, taken) => core.hold(keys, taker, taken),
    abandon: (keys, token) => protocol.abandon(keys, token),
    timerWakeup: () => core.stats.timerWakeups++,
  };
}

/** The parts of an engine both the local handoffs and the shared holds take. */
function engineParts(core: EngineCore) {
  const { protocol, leases, tokens, notifier, stats, fair, localHandoffs } = core;
  return { protocol, leases, tokens, notifier, stats, fair, localHandoffs };
}

/** What the local handoffs take of the engine (see `HandoffEngine`). @internal */
export function handoffEngine(core: EngineCore): HandoffEngine {
  return {
    ...engineParts(core),
    closed: () => core.closed(),
    subscribed: () => core.wakeUps.subscribed(),
    leaseEnded: (lease) => core.leaseEnded(lease),
    holdReturned: (lease, wakeHead) => core.holdReturned(lease, wakeHead),
    giveBack: (lease) => core.giveBack(lease),
  };
}

/** What the shared holds take of the engine (see `SharedHoldsEngine`). @internal */
export function sharedHoldsEngine(
  core: EngineCore,
  keysWait: MultiKeyWaitContext,
): SharedHoldsEngine {
  const { grants } = core;
  return {
    ...engineParts(core),
    policies: core.policies,
    keysWait,
    closed: () => core.closed(),
    taker: (ttl, acks) => core.taker(ttl, acks),
    listenForGrants: () => ({ ready: core.wakeUps.subscribed(), stop: () => undefined }),
    claim: (keys, taker, grant, share) => grants.claim(keys, taker, grant, share),
    release: (lease) => core.release(lease),
  };
}
