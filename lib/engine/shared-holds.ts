import { performance } from 'node:perf_hooks';
import { LockNotAcquiredError } from '../errors';
import type { LockNotifier } from '../redis/lock-notifier';
import type { LockProtocol, ReleaseGrant, ReplicaAcks, Taken } from '../redis/lock-protocol';
import type { EnginePolicies } from './engine-policies';
import { KeyCounts } from './key-counts';
import type { Lease, LeaseTaker, Leases } from './lease';
import type { AcquireRequest, LockClientStats, Share } from './lock-backend';
import { waitForKeys } from './multi-key-wait';
import { ShareGroup } from './share-group';
import {
  conflictError,
  type PermitWait,
  type SharedGrantee,
  SharedWait,
  type SharedWaitEngine,
  type SharedWaitOwner,
  shareArg,
} from './shared-wait';
import { WriterNotices } from './writer-notices';

/**
 * What the shared holds need of the engine that owns them (`LockClient`): its parts, read only,
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
  readonly leases: Pick<Leases, 'taken' | 'joined' | 'freshFor'>;
  readonly notifier: Pick<LockNotifier, 'listenInBackground' | 'heardSince'>;
  readonly stats: LockClientStats;
  /** Single node: a shared wait of one key queues in Redis and a release grants it. */
  readonly fair: boolean;
  /** Fast paths switched on: `readJoin`, `permitPass` are taken here. */
  readonly policies: Pick<EnginePolicies, 'readJoin' | 'permitPass'>;
  /** Whether the client closed: a freed permit then goes back to Redis, not on. */
  closed(): boolean;
  /** A new acquisition's token, lease length and start. */
  taker(ttl: number, acks: ReplicaAcks | undefined): LeaseTaker;
  /** Whether a caller of this process holds, tries or awaits `key` exclusively. */
  busyHere(key: string): boolean;
  /** Renews a lease set for a claim window only to the taker's full lease. */
  claimRest(lease: Lease, ttl: number, taken: Taken): void;
  /** What a release's answer granted, to waiters of this process (exclusive or shared). */
  answered(keys: readonly string[], grants: readonly ReleaseGrant[], sentAt: number): void;
}

/**
 * The read holds and permits of one client group (`LockClient` owns one and hands it every
 * shared `acquire` and release). No local line: shared holders do not exclude each other, and a
 * local handoff would skip the Redis queue that keeps a waiting writer ahead of later readers.
 * Instead readers of this process join one read share (`ShareGroup`) until a writer waits, and
 * a freed permit passes to a permit wait of this process queued in Redis (bounded like local
 * handoffs).
 * @internal
 */
export class SharedHolds implements SharedWaitOwner {
  /** Shared holds waiting for a grant, by token: who takes the lease. */
  private readonly grantees = new Map<string, SharedGrantee>();
  /** Keys with shared holds or waits of this process, and how many. */
  private readonly sharedKeys = new KeyCounts();
  /** Per key (single node): shared waits of this process queued in Redis right now. */
  private readonly sharedWaits = new KeyCounts();
  /** Per key with shared waits queued: when a writer was last heard waiting (see hold). */
  private readonly writerNotices = new WriterNotices(this.sharedWaits);
  /** Per key (single node): permit waits of this process queued in Redis, oldest first. */
  private readonly permitWaits = new Map<string, Set<PermitWait>>();
  /** Per key: the read hold of this process that later readers of this process may join. */
  private readonly openReads = new Map<string, Lease>();

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
  async acquire(keys: readonly string[], request: AcquireRequest, share: Share): Promise<Lease> {
    const { ttl, waitTimeout, signal, acks } = request;
    if (signal?.aborted) throw signal.reason;
    if (share === 'read' && keys.length === 1) {
      const joined = this.joinRead(keys, ttl, acks);
      if (joined) return joined;
    }
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
        this.writerNotices.waitEnded(keys[0]);
      }
    } catch (err) {
      this.done(keys);
      throw err;
    }
  }

  /** The lease of a round that took a share (for `SharedWait` too). */
  hold(keys: readonly string[], taker: LeaseTaker, taken: Taken, share: Share): Lease {
    const { leases, tokens, notifier } = this.engine;
    const lease = leases.taken(keys, taker, taken);
    lease.share = share;
    // A grant for this token that is still on its way is ignored.
    tokens.hold(taker.token);
    if (
      share === 'read' &&
      keys.length === 1 &&
      !lease.acks &&
      this.engine.localHandoffs > 0 &&
      this.engine.policies.readJoin &&
      // A writer heard waiting since this reader asked (queued behind it, so its grant came
      // first): later readers of this process wait behind that writer, none joins.
      !this.writerNotices.heardSince(keys[0], taker.startedAt)
    ) {
      // Later readers of this process may join it until a writer waits.
      lease.group = new ShareGroup(taker.ttl, taker.startedAt, lease.validUntil);
      this.openReads.set(keys[0], lease);
      // Joins need the writer notices of the grant channel: listen (once) if not yet.
      notifier.listenInBackground();
    }
    this.engine.claimRest(lease, taker.ttl, taken);
    return lease;
  }

  /**
   * A shared holder lets go: a holder of a share others of this process still hold just leaves;
   * the last one out gives the share back (the last of all holders frees or grants the key, as a
   * writer's release does).
   */
  release(lease: Lease): Promise<void> {
    this.done(lease.keys);
    const passes = this.engine.policies.permitPass && !this.engine.closed();
    const next = passes ? this.permitWaitFor(lease) : undefined;
    if (next) return this.passPermit(lease, next);
    const keep = this.leftShare(lease, 0);
    if (keep === false) return Promise.resolve();
    if (keep > 0) return this.letExpire(lease, keep);
    return this.giveBack(lease);
  }

  /** `LockClient.releaseByExpiry` of a share: it stays locked `ms` more unless others hold it. */
  releaseByExpiry(lease: Lease, ms: number): Promise<void> {
    this.done(lease.keys);
    const keep = this.leftShare(lease, ms);
    return keep === false ? Promise.resolve() : this.letExpire(lease, keep);
  }

  /** A writer waits for `key`: the read share of this process there takes no more readers. */
  writerWaits(key: string): void {
    this.writerNotices.writerHeard(key, performance.now());
    this.openReads.get(key)?.group?.close();
    this.openReads.delete(key);
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

  /**
   * The holder of `lease` leaves its group (`keepMs`: it asked the key to stay locked that
   * long). False while others of this process hold the share; else how long it must stay
   * locked (0: give it back now).
   */
  private leftShare(lease: Lease, keepMs: number): number | false {
    const { group } = lease;
    if (!group) return keepMs;
    const key = lease.keys[0];
    const keep = group.left(performance.now(), keepMs);
    if (keep !== false && this.openReads.get(key)?.group === group) this.openReads.delete(key);
    return keep;
  }

  /** The share's lease is set to end in `ms` (not renewed): the other holders go on meanwhile. */
  private letExpire(lease: Lease, ms: number): Promise<void> {
    this.engine.tokens.drop(lease.token);
    const { keys, token, acks, share } = lease;
    return this.engine.protocol
      .extend(keys, token, Math.max(1, Math.ceil(ms)), acks, shareArg(share), false)
      .then(() => undefined);
  }

  /** Gives a share back to Redis. */
  private giveBack(lease: Lease): Promise<void> {
    const { engine } = this;
    engine.tokens.drop(lease.token);
    const sentAt = performance.now();
    const granted = (grants: readonly ReleaseGrant[]) =>
      engine.answered(lease.keys, grants, sentAt);
    return engine.protocol.release(lease.keys, lease.token, granted).then(() => undefined);
  }

  /**
   * A reader joins the read hold of this process on the key, with no round trip: the same token
   * and fence, and the share's validity. Only while nothing of this process waits for or holds
   * the key exclusively (a waiting writer is not overtaken), the share was set or renewed
   * moments ago (as for a local handoff), and no writer of another process is known to wait (see
   * ShareGroup).
   */
  private joinRead(
    keys: readonly string[],
    ttl: number,
    acks: ReplicaAcks | undefined,
  ): Lease | undefined {
    const key = keys[0];
    const base = this.openReads.get(key);
    const group = base?.group;
    if (!base || !group) return undefined;
    const now = performance.now();
    if (group.closed || group.validUntil <= now) {
      this.openReads.delete(key);
      return undefined;
    }
    const { leases, notifier } = this.engine;
    if (acks || !group.takes(ttl, now, leases.freshFor(ttl))) return undefined;
    // A writer's notice could have been missed: no join.
    if (!notifier.heardSince(group.askedAt)) return undefined;
    if (this.engine.busyHere(key)) return undefined;
    group.joined();
    this.started(keys);
    this.engine.stats.readJoins++;
    return leases.joined(base, group, ttl);
  }

  /**
   * The oldest permit wait of this process that `lease`'s permit may pass to, if any: the same
   * N and ttl, no replica acknowledgements, no attempt of its own on the way, and the permit
   * passed past a waiter of another process fewer than `localHandoffs` times since it last went
   * back to Redis (then it goes back to the Redis queue, so that waiter gets its turn; a pass
   * with nobody of another process queued ahead does not count).
   */
  private permitWaitFor(lease: Lease): PermitWait | undefined {
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
  private async passPermit(lease: Lease, next: PermitWait): Promise<void> {
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
