import { LockConfigError } from '../errors';
import type { Grant } from './protocol/key-space';
import type { LockProtocol, Outcome, SharedOutcome, Taken } from './protocol/lock-protocol';
import { MODE_MISMATCH, PERMITS_MISMATCH } from '../core/core.messages';
import type { RedisLease, RedisTaker } from './redis-lease';
import type { Share } from '../core/lock-backend';
import type { Granted, MultiKeyWaitContext, ReleaseWatch } from './multi-key-wait';
import type { Tokens } from './tokens';
import type { GrantedKey } from './waiter';

/**
 * What a shared wait needs of the engine (`SharedHoldsEngine` is this and more).
 * @internal
 */
export interface SharedWaitEngine {
  readonly protocol: Pick<LockProtocol, 'attemptShared' | 'abandon'>;
  readonly tokens: Pick<Tokens, 'drop'>;
  readonly localHandoffs: number;
  /** How a wait of several keys goes: what a shared wait does unless it says otherwise. */
  readonly keysWait: MultiKeyWaitContext;
  /** Listens for this group's grant channel (a queued wait's grants come there). */
  listenForGrants(): ReleaseWatch;
  /** Confirms a grant (its claim): undefined when the key was lost meanwhile. */
  claim(
    keys: readonly string[],
    taker: RedisTaker,
    grant: GrantedKey,
    share: Share,
  ): Promise<Taken | undefined>;
  release(lease: RedisLease): Promise<void>;
}

/**
 * What a shared wait needs of the shared holds of its process (`SharedHolds`): to hold what it
 * took, and to be found by a grant or a permit passed on.
 * @internal
 */
export interface SharedWaitOwner {
  hold(keys: readonly string[], taker: RedisTaker, taken: Taken, share: Share): RedisLease;
  expectGrant(token: string, grantee: SharedGrantee): void;
  grantEnded(token: string, key: string, permit: PermitWait | undefined): void;
  permitWaitStarted(key: string, wait: PermitWait): void;
  /** Counted among the keys with shared holds or waits here. */
  started(keys: readonly string[]): void;
}

/** A shared waiter of this process queued in Redis, told of its grant. @internal */
export interface SharedGrantee {
  /** The grant message came (from any process's release). */
  message(grant: Grant): void;
}

/**
 * A permit wait of this process queued in Redis, which a holder of this process may pass to.
 * @internal
 */
export interface PermitWait {
  readonly share: number;
  readonly taker: RedisTaker;
  /** Whether an attempt of the wait is on its way. */
  attempting(): boolean;
  /** A holder's pass to it is on its way (no other holder picks it meanwhile). */
  passing?: boolean;
  /** A holder passed its permit on: the wait ends with it. */
  take(passed: Extract<Granted, { kind: 'handed' }>): void;
}

/**
 * How one shared wait attempts, holds, is granted and gives up (what `waitForKeys` asks of it):
 * as a wait of several keys, but its attempts ask for a share, and on a single node it is queued
 * in Redis and granted by a release (or passed a permit by a holder of this process).
 * @internal
 */
export class SharedWait implements MultiKeyWaitContext {
  readonly closing: AbortSignal;
  /** Only a wait queued in Redis is granted; a racing one is woken by its keys' releases. */
  readonly grants?: MultiKeyWaitContext['grants'];
  /** The share as the scripts take it. */
  private readonly arg: string;

  constructor(
    private readonly holds: SharedWaitOwner,
    private readonly engine: SharedWaitEngine,
    private readonly keys: readonly string[],
    private readonly share: Share,
    private readonly waiter: RedisTaker,
    private readonly queued: boolean,
  ) {
    this.closing = engine.keysWait.closing;
    this.arg = shareArg(share)!;
    if (queued)
      this.grants = (token, deliver, attempting) => this.granted(token, deliver, attempting);
  }

  async attempt(keys: readonly string[], taker: RedisTaker, waitMs: number): Promise<Outcome> {
    const r: SharedOutcome = await this.engine.protocol.attemptShared(
      keys,
      taker.token,
      taker.ttl,
      waitMs,
      this.arg,
      undefined,
      taker.acks,
    );
    if (r.kind === 'conflict') throw conflictError(keys[0], this.share, r.held);
    return r;
  }

  hold(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease {
    return this.holds.hold(keys, taker, taken, this.share);
  }

  abandon(keys: readonly string[], token: string): void {
    this.engine.tokens.drop(token);
    this.engine.protocol.abandon(keys, token);
  }

  /** Queued in Redis: a release grants the share (on this group's channel), nothing per key. */
  watch(keys: readonly string[], onRelease: () => void): ReleaseWatch {
    if (this.queued) return this.engine.listenForGrants();
    return this.engine.keysWait.watch(keys, onRelease);
  }

  timerWakeup(): void {
    this.engine.keysWait.timerWakeup();
  }

  unusedShare(lease: RedisLease): void {
    // Counted again: its release counts it out.
    this.holds.started(lease.keys);
    void this.engine.release(lease).catch(() => undefined);
  }

  /**
   * Listens for what a release grants `token` (its grant message) and, for permits, for a holder
   * of this process passing its permit on.
   */
  private granted(
    token: string,
    deliver: (granted: Granted) => void,
    attempting: () => boolean,
  ): () => void {
    const { engine, holds, keys, waiter, share } = this;
    const key = keys[0];
    let permit: PermitWait | undefined;
    // Granted or passed a share: no other way may give it one any more.
    const stop = () => holds.grantEnded(token, key, permit);
    holds.expectGrant(token, {
      // A grant message: a hold once the wait's claim is confirmed (see `claim`).
      message: (grant) => {
        stop();
        deliver({ kind: 'grant', claim: () => engine.claim([grant.key], waiter, grant, share) });
      },
    });
    if (typeof share === 'number' && engine.localHandoffs > 0) {
      permit = {
        share,
        taker: waiter,
        attempting,
        take: (passed) => {
          stop();
          engine.tokens.drop(token);
          // An attempt on its way may take a share or queue again for this token: the release
          // after it, on the same connection, undoes that.
          if (attempting()) engine.protocol.abandon(keys, token);
          deliver(passed);
        },
      };
      holds.permitWaitStarted(key, permit);
    }
    return stop;
  }
}

/** A share as the scripts take it: 'r' for a read hold, N for permits of N. */
export function shareArg(share: Share | undefined): string | undefined {
  if (share === undefined) return undefined;
  return share === 'read' ? 'r' : String(share);
}

/** The key is held as another kind of shared hold (`held`: 0 read, N permits of N). */
export function conflictError(key: string, share: Share, held: number): LockConfigError {
  const asked = share === 'read' ? 'read' : `permits: ${share}`;
  if (share !== 'read' && held > 0) {
    return new LockConfigError(PERMITS_MISMATCH(key, share, held), 'permits');
  }
  const holders = held === 0 ? 'read' : `permits: ${held}`;
  return new LockConfigError(
    MODE_MISMATCH(key, asked, holders),
    share === 'read' ? 'mode' : 'permits',
  );
}
