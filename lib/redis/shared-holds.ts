import { LockNotAcquiredError } from '../errors';
import type { LockProtocol, ReplicaAcks, Taken } from './protocol/lock-protocol';
import type { EnginePolicies } from './engine-policies';
import { KeyCounts } from '../core/key-counts';
import type { RedisLease, RedisTaker, RedisLeases } from './redis-lease';
import type { AcquireRequest, LockCounts, Share } from '../core/lock-backend';
import { waitForKeys } from './multi-key-wait';
import {
  conflictError,
  type PermitWait,
  type SharedGrantee,
  SharedWait,
  type SharedWaitEngine,
  type SharedWaitOwner,
  shareArg,
} from './shared-wait';
import type { Tokens } from './tokens';

/**
 * What the shared holds need of the engine that owns them (`RedisLockBackend`): its parts, read only,
 * and the few steps of its own that a shared hold takes as an exclusive one does (a token, a
 * claim, a release), beside what each of their waits needs (`SharedWaitEngine`). Kept narrow so
 * that the shared holds never reach into the exclusive lines.
 * @internal
 */
export interface SharedHoldsEngine extends SharedWaitEngine {
  readonly protocol: Pick<
    LockProtocol,
    'attemptShared' | 'abandon' | 'extend' | 'release' | 'passShare'
  >;
  readonly leases: Pick<RedisLeases, 'taken'>;
  readonly tokens: Pick<Tokens, 'hold' | 'drop'>;
  readonly stats: LockCounts;
  /** Single node: a shared wait of one key queues in Redis and a release grants it. */
  readonly fair: boolean;
  /** Fast paths switched on: `permitPass` is taken here. */
  readonly policies: Pick<EnginePolicies, 'permitPass'>;
  /** Whether the backend closed: a freed permit then goes back to Redis, not on. */
  closed(): boolean;
  /** A new acquisition's token, lease length and start. */
  taker(ttl: number, acks: ReplicaAcks | undefined): RedisTaker;
}

/**
 * The read holds and permits of one client group (`RedisLockBackend` owns one and hands it every
 * shared `acquire` and release). No local line: shared holders do not exclude each other, and a
 * local handoff would skip the Redis queue that keeps a waiting writer ahead of later readers.
 * Each reader holds a share of its own (readers joining one share of their process gained nothing
 * on the bench: docs/ARCHITECTURE.md, "Fast paths"); a freed permit passes to a permit wait of
 * this process queued in Redis (bounded like local handoffs).
 * @internal
 */
export class SharedHolds implements SharedWaitOwner {
  /** Shared holds waiting for a grant, by token: who takes the lease. */
  private readonly grantees = new Map<string, SharedGrantee>();
  /** Keys with shared holds or waits of this process, and how many. */
  private readonly sharedKeys = new KeyCounts();
  /** Per key (single node): shared waits of this process queued in Redis right now. */
  private readonly sharedWaits = new KeyCounts();
  /** Per key (single node): permit waits of this process queued in Redis, oldest first. */
  private readonly permitWaits = new Map<string, Set<PermitWait>>();

  constructor(private readonly engine: SharedHoldsEngine) {}

  /** Keys with shared holds or waits of this process. */
  keys(): IterableIterator<string> {
    return this.sharedKeys.keys();
  }

  /** The shared wait queued for a grant to `token`, if any. */
  grantee(token: string): SharedGrantee | undefined {
    return this.grantees.get(token);
  }

  /**
   * A read hold or a permit. One first try; then, on a single node, one key, queued in Redis and
   * granted by the release that makes room; otherwise racing like several keys.
   */
  async acquire(
    keys: readonly string[],
    request: AcquireRequest,
    share: Share,
  ): Promise<RedisLease> {
    const { ttl, waitTimeout, signal, acks } = request;
    if (signal?.aborted) throw signal.reason;
    const taker = this.engine.taker(ttl, acks);
    const arg = shareArg(share)!;
    const queued = this.engine.fair && keys.length === 1;
    this.started(keys);
    try {
      // Others of this process queue for the key in Redis: a first try could only be refused
      // (the queue goes first), so the caller goes straight into it.
      if (!queued || waitTimeout <= 0 || !this.sharedWaits.has(keys[0])) {
        const first = await this.engine.protocol.attemptShared(
          keys,
          taker.token,
          ttl,
          0,
          arg,
          taker.startedAt,
          acks,
          waitTimeout > 0,
        );
        if (first.kind === 'ok') return this.hold(keys, taker, first, share);
        if (first.kind === 'conflict') throw conflictError(keys[0], share, first.held);
        if (waitTimeout <= 0) throw new LockNotAcquiredError(keys, 0, first.pttl);
      }
      const deadline = taker.startedAt + waitTimeout;
      const ctx = new SharedWait(this, this.engine, keys, share, taker, queued);
      if (!queued) return await waitForKeys(ctx, keys, taker, deadline, signal);
      this.sharedWaits.add(keys[0]);
      try {
        return await waitForKeys(ctx, keys, taker, deadline, signal);
      } finally {
        this.sharedWaits.remove(keys[0]);
      }
    } catch (err) {
      this.done(keys);
      throw err;
    }
  }

  /** The lease of a round that took a share (for `SharedWait` too). */
  hold(keys: readonly string[], taker: RedisTaker, taken: Taken, share: Share): RedisLease {
    const { leases, tokens } = this.engine;
    const lease = leases.taken(keys, taker, taken);
    lease.share = share;
    // A grant for this token that is still on its way is ignored.
    tokens.hold(taker.token);
    return lease;
  }

  /**
   * A shared holder lets go: its permit passes to a permit wait of this process, or the share
   * goes back to Redis (the last of all holders frees or grants the key, as a writer's release
   * does).
   */
  release(lease: RedisLease): Promise<void> {
    this.done(lease.keys);
    const passes = this.engine.policies.permitPass && !this.engine.closed();
    const next = passes ? this.permitWaitFor(lease) : undefined;
    if (next) return this.passPermit(lease, next);
    return this.giveBack(lease);
  }

  /** `RedisLockBackend.releaseByExpiry` of a share: it stays locked `ms` more. */
  releaseByExpiry(lease: RedisLease, ms: number): Promise<void> {
    this.done(lease.keys);
    return this.letExpire(lease, ms);
  }

  /** A shared wait queued in Redis listens for its grant (see `SharedWait.grants`). */
  expectGrant(token: string, grantee: SharedGrantee): void {
    this.grantees.set(token, grantee);
  }

  /** The wait for `token` was granted or passed a share: no other way may give it one. */
  grantEnded(token: string, key: string, permit: PermitWait | undefined): void {
    this.grantees.delete(token);
    if (permit) this.permitWaitEnded(key, permit);
  }

  permitWaitStarted(key: string, wait: PermitWait): void {
    let waits = this.permitWaits.get(key);
    if (!waits) this.permitWaits.set(key, (waits = new Set()));
    waits.add(wait);
  }

  /** Counted among the keys with shared holds or waits here (each is counted out once). */
  started(keys: readonly string[]): void {
    for (const key of keys) this.sharedKeys.add(key);
  }

  private done(keys: readonly string[]): void {
    for (const key of keys) this.sharedKeys.remove(key);
  }

  /** The share's lease is set to end in `ms` (not renewed): the other holders go on meanwhile. */
  private letExpire(lease: RedisLease, ms: number): Promise<void> {
    this.engine.tokens.drop(lease.token);
    const { keys, token, acks, share } = lease;
    return this.engine.protocol
      .extend(keys, token, Math.max(1, Math.ceil(ms)), acks, shareArg(share), false)
      .then(() => undefined);
  }

  /** Gives a share back to Redis. */
  private giveBack(lease: RedisLease): Promise<void> {
    const { engine } = this;
    engine.tokens.drop(lease.token);
    return engine.protocol.release(lease.keys, lease.token).then(() => undefined);
  }

  /**
   * The oldest permit wait of this process that `lease`'s permit may pass to, if any: the same
   * N and ttl, no replica acknowledgements, no attempt of its own on the way, and the permit
   * passed past a waiter of another process fewer than `localHandoffs` times since it last went
   * back to Redis (then it goes back to the Redis queue, so that waiter gets its turn; a pass
   * with nobody of another process queued ahead does not count).
   */
  private permitWaitFor(lease: RedisLease): PermitWait | undefined {
    const { share } = lease;
    if (typeof share !== 'number' || lease.acks || lease.passes >= this.engine.localHandoffs) {
      return undefined;
    }
    const waits = this.permitWaits.get(lease.keys[0]);
    if (!waits) return undefined;
    for (const wait of waits) {
      if (wait.share === share && !wait.taker.acks && !wait.passing && !wait.attempting()) {
        return wait;
      }
    }
    return undefined;
  }

  /**
   * Passes a permit to a wait of this process in one round trip (PASS_SHARE: the holder's share
   * renewed to the waiter's lease, a new fence): the waiter holds it with the holder's token.
   * Given back as usual when the share was lost, or the wait ended meanwhile.
   */
  private async passPermit(lease: RedisLease, next: PermitWait): Promise<void> {
    const { engine } = this;
    next.passing = true;
    const pass = await engine.protocol
      .passShare(lease.keys, lease.token, next.taker)
      .catch(() => undefined);
    next.passing = false;
    if (!pass) return this.giveBack(lease);
    const passed = engine.leases.taken(
      lease.keys,
      { ...next.taker, token: lease.token },
      pass.taken,
    );
    passed.share = lease.share;
    // Only a pass that went past a waiter of another process counts toward the bound (a pass to
    // the oldest waiter there is is no barging).
    passed.passes = pass.pastOthers ? lease.passes + 1 : lease.passes;
    if (!this.permitWaits.get(lease.keys[0])?.has(next)) {
      // The wait ended (or was granted) meanwhile: the permit goes on or back from here.
      this.started(lease.keys);
      return engine.release(passed);
    }
    // Counted already: the wait's own count goes on with the permit.
    engine.stats.localHandoffs++;
    next.take({ kind: 'handed', lease: passed });
  }

  private permitWaitEnded(key: string, wait: PermitWait): void {
    const waits = this.permitWaits.get(key);
    if (waits?.delete(wait) && waits.size === 0) this.permitWaits.delete(key);
  }
}
