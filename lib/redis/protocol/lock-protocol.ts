import { performance } from 'node:perf_hooks';
import { LockBackendError } from '../../errors';
import { promiseFrom } from '../../settle-to';
import { type AcquireRound, runAcquire, settleFences, type SharedOutcome } from './acquire-round';
import type { Outcome, Taken } from './acquire-round';
import { type Renewal, runExtend } from './extend-round';
import { KEYS_PER_LOCK, type KeySpace } from './key-space';
import { LockNodes, type LockProtocolSettings } from './lock-nodes';
import type { Quorum, VoteDone } from './quorum';
import type { RedisNode } from './redis-node';
import { runRelease } from './release-round';
import { RenewalBatcher } from './renewal-batcher';
import { releaseOnOne, tryOnOne } from './single-node-cycle';
import { UNDO_STILL_SENT } from './redis.messages';
import { GRANT_CLAIM_MS } from './script-constants';
import { asError, type ReplicaAcks, type ScriptRunner } from './script-runner';
import {
  ACQUIRE,
  ACQUIRE_SHARED,
  CLAIM,
  type FenceMode,
  FORCE_RELEASE,
  HANDOFF,
  LET_EXPIRE,
  PASS_SHARE,
  RELEASE_TO,
  REFILL,
  type RefillReply,
  type ScriptArgs,
  type ShareArg,
  TAKE_ANY,
  TRY,
} from './scripts';

export type { Outcome, SharedOutcome, Taken } from './acquire-round';
export type { LockProtocolSettings } from './lock-nodes';
export type { ReplicaAcks } from './script-runner';

/** What a local release asks of Redis for the next caller of this process. */
export interface NextCaller {
  readonly token: string;
  readonly ttl: number;
  /** Remaining wait in ms. */
  remaining(): number;
}

/** Counters the protocol keeps. */
export interface ProtocolCounters {
  /** Acquire round trips sent. */
  attempts: number;
}

/**
 * What the engine asks of a group's nodes, one round at a time: acquire rounds (a first try,
 * an attempt that queues or races, a sweep over many keys), renewals, releases, handoffs.
 * Redlock's rules on several nodes: a round succeeds on a majority within the lease's validity,
 * and contention is told apart from failure (a backend failure only when errors alone make a
 * majority impossible). Whatever a round took and cannot keep is undone at once: the undo goes
 * on the same connection, after the command it undoes. Every round over the nodes is one
 * `Quorum.collect` (`acquire-round.ts`, `release-round.ts`, `extend-round.ts`); a single node
 * is a vote of one, except for the uncontended cycle's first try and release, which skip the
 * vote there (`single-node-cycle.ts`).
 * @internal
 */
export class LockProtocol {
  /** Watchdog renewals due together, sent as one script call per node. */
  private readonly renewals: RenewalBatcher;
  private readonly group: LockNodes;

  constructor(
    nodes: readonly RedisNode[],
    space: KeySpace,
    runner: ScriptRunner,
    settings: LockProtocolSettings,
    private readonly counters: ProtocolCounters,
  ) {
    this.group = new LockNodes(nodes, space, runner, settings);
    this.renewals = new RenewalBatcher(runner, nodes.length > 1 ? '1' : '0');
  }

  /** How votes count on this group. */
  get quorum(): Quorum {
    return this.group.quorum;
  }

  /**
   * A first try at one key, answered by callback (the uncontended cycle's acquire: no promise
   * is made on the way). It neither queues nor flags, so TRY with the lock and fence keys only;
   * quorum groups reserve one fence (block 1): no local handoff without a round trip there.
   * `waits`: the caller waits if refused (see `AcquireRound.waits`).
   */
  firstTryThen(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
    acks: ReplicaAcks | undefined,
    waits: boolean,
    done: (error: unknown, outcome?: Outcome) => void,
  ): void {
    this.counters.attempts++;
    this.group.restarts.leaseInUse(ttl);
    const { space, settings, fenceMode } = this.group;
    const { block } = settings;
    const args: [string, number, number, FenceMode] = [token, ttl, block, fenceMode];
    const round: AcquireRound = {
      keys,
      token,
      ttl,
      start,
      spare: block - 1,
      uncontended: true,
      everyNode: false,
      waits,
      acks,
    };
    // TRY answers `ok` or `busy` only: its outcome is an Outcome.
    const answer = done as VoteDone<SharedOutcome>;
    const take = space.keySet(keys[0]).take;
    if (this.group.single) return tryOnOne(this.group, take, args, round, answer);
    runAcquire(this.group, TRY, [take], args, round, answer);
  }

  /**
   * One acquire round for `token`. `waitMs` > 0: the caller waits that long, so the round
   * queues it for a grant (fair groups, single key) or flags the key so a release publishes.
   * `waitMs` 0 with one key: a first try (`firstTryThen`). `waits`: the caller waits if refused
   * (see `AcquireRound.waits`).
   * @throws LockBackendError when too many nodes fail for a quorum, or restarted nodes keep a
   *   caller that does not wait from a majority
   */
  attempt(
    keys: readonly string[],
    token: string,
    ttl: number,
    waitMs: number,
    start = performance.now(),
    acks?: ReplicaAcks,
    waits = waitMs > 0,
  ): Promise<Outcome> {
    if (this.group.undosOf(token)) {
      const again = () => this.attempt(keys, token, ttl, waitMs, start, acks, waits);
      return this.afterUndos(keys, token, waitMs, again);
    }
    if (waitMs <= 0 && keys.length === 1) {
      return promiseFrom((done) => this.firstTryThen(keys, token, ttl, start, acks, waits, done));
    }
    this.counters.attempts++;
    this.group.restarts.leaseInUse(ttl);
    const { space, settings, fenceMode } = this.group;
    const units = space.units(keys);
    const queue = this.queues(units);
    const args: ScriptArgs = [
      token,
      ttl,
      Math.ceil(waitMs),
      queue ? '1' : '0',
      queue ? settings.block : 1,
      fenceMode,
    ];
    const spare = queue ? settings.block - 1 : 0;
    const round: AcquireRound = {
      keys,
      token,
      ttl,
      start,
      spare,
      uncontended: false,
      everyNode: false,
      waits,
      acks,
    };
    // ACQUIRE answers `ok` or `busy` only: its outcome is an Outcome.
    return promiseFrom<Outcome>((done) =>
      runAcquire(this.group, ACQUIRE, units, args, round, done as VoteDone<SharedOutcome>),
    );
  }

  /**
   * One acquire round of a shared hold (`share`: 'r' read, or N permits of N), as `attempt`
   * otherwise: `waitMs` > 0 queues the token (fair groups, single key) or flags the keys. A read
   * hold reserves no fence (it gets the counter's value); a permit mints one. `waits`: the caller
   * waits if refused (see `AcquireRound.waits`).
   * @throws LockBackendError when too many nodes fail for a quorum, or restarted nodes keep a
   *   caller that does not wait from a majority
   */
  attemptShared(
    keys: readonly string[],
    token: string,
    ttl: number,
    waitMs: number,
    share: ShareArg,
    start = performance.now(),
    acks?: ReplicaAcks,
    waits = waitMs > 0,
  ): Promise<SharedOutcome> {
    if (this.group.undosOf(token)) {
      const again = () => this.attemptShared(keys, token, ttl, waitMs, share, start, acks, waits);
      return this.afterUndos(keys, token, waitMs, again);
    }
    this.counters.attempts++;
    this.group.restarts.leaseInUse(ttl);
    const { space, fenceMode } = this.group;
    const units = space.units(keys);
    const wait = waitMs > 0 ? Math.ceil(waitMs) : 0;
    const queue = wait > 0 && this.queues(units);
    const args: ScriptArgs = [
      token,
      ttl,
      wait,
      queue ? '1' : '0',
      share,
      1,
      fenceMode,
      this.group.single ? '1' : '0',
    ];
    // Permits on a quorum: every node must admit the holder. With a majority each node could
    // count its own N holders, and up to N * nodes / majority (1.5 N on 3 nodes) would hold at
    // once; a holder on every node bounds them to N.
    const everyNode = share !== 'r';
    const round: AcquireRound = {
      keys,
      token,
      ttl,
      start,
      spare: 0,
      uncontended: false,
      everyNode,
      waits,
      acks,
    };
    return promiseFrom((done) => runAcquire(this.group, ACQUIRE_SHARED, units, args, round, done));
  }

  /** Whether an undo of `token`'s may still run (see `LockNodes.undosOf`). */
  undoing(token: string): boolean {
    return this.group.undosOf(token) !== undefined;
  }

  /**
   * `round` of `token` once its undos are done in the driver (see `LockNodes.undosOf`), waiting
   * for them at most `ms`: past that, a LockBackendError (the caller retries as after any
   * failed round, or its wait ends).
   */
  private async afterUndos<T>(
    keys: readonly string[],
    token: string,
    ms: number,
    round: () => Promise<T>,
  ): Promise<T> {
    const undos = this.group.undosOf(token);
    if (undos && ms > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([undos, new Promise((ended) => (timer = setTimeout(ended, ms)))]);
      clearTimeout(timer);
    }
    if (this.group.undosOf(token)) {
      throw new LockBackendError(keys, [new Error(UNDO_STILL_SENT(Math.round(ms)))]);
    }
    return round();
  }

  /** Single key on a fair group (one node): the round queues the token for a grant. */
  private queues(units: string[][]): boolean {
    return this.group.single && units.length === 1 && units[0].length === KEYS_PER_LOCK;
  }

  /**
   * A sweep in one round trip (single node, no Cluster): takes the first free key of `keys`.
   * @returns the index taken and its lease, or the shortest lease left among them
   * @throws LockBackendError when the node fails
   */
  async takeAny(
    keys: readonly string[],
    token: string,
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<{ index: number; taken: Taken } | number> {
    this.counters.attempts++;
    const { space, runner, settings, fenceMode } = this.group;
    const scriptKeys: string[] = [];
    for (const key of keys) scriptKeys.push(...space.keySet(key).take);
    const start = performance.now();
    const node = this.group.nodes[0];
    const reply = await runner
      .runAcked(node, TAKE_ANY, scriptKeys, [token, ttl, settings.block, fenceMode], acks)
      .catch((e: unknown) => {
        this.group.undo(node, keys, token);
        throw new LockBackendError(keys, [asError(e)]);
      });
    if (reply.kind === 'busy') return reply.pttl;
    // A block of fences, as for a first try: the key can pass to our next caller in memory.
    const taken: Taken = {
      kind: 'ok',
      fences: [reply.fence],
      start,
      spare: settings.block - 1,
      uncontended: true,
    };
    return { index: reply.index, taken };
  }

  /**
   * A grantee's claim (single node): renews the key a release granted to `token` from its claim
   * window to `ttl` ms (CLAIM; a share: EXTEND_SHARED), once the token's undos are done (see
   * `afterUndos`; the grant is worth nothing after its claim window).
   * @returns the key's fence counter (CLAIM's answer; 0 for a share, or with no counter), or
   *   false when the key is no longer the token's
   * @throws LockBackendError when the node fails
   */
  claim(
    keys: readonly string[],
    token: string,
    ttl: number,
    acks?: ReplicaAcks,
    share?: ShareArg,
  ): Promise<number | false> {
    const claim = () => this.claimNow(keys, token, ttl, acks, share);
    return this.group.undosOf(token)
      ? this.afterUndos(keys, token, GRANT_CLAIM_MS, claim)
      : claim();
  }

  private async claimNow(
    keys: readonly string[],
    token: string,
    ttl: number,
    acks: ReplicaAcks | undefined,
    share: ShareArg | undefined,
  ): Promise<number | false> {
    const { single, nodes, space, runner } = this.group;
    if (share !== undefined || !single || keys.length !== 1) {
      return (await this.extend(keys, token, ttl, acks, share)) && 0;
    }
    this.group.restarts.leaseInUse(ttl);
    return runner
      .runAcked(nodes[0], CLAIM, space.units(keys)[0], [token, ttl], acks)
      .catch((e: unknown) => {
        throw new LockBackendError(keys, [asError(e)], 'extend');
      });
  }

  /**
   * Renews every key of `token` to `ttl` ms from now. On a quorum, nodes that lost the lock (a
   * restart without persistence) get it back while the token still holds a majority elsewhere,
   * so rolling restarts never leave it on a minority; without that majority the put-back is
   * given back at once. `batched` (the watchdog's renewals): it joins the renewals due within a
   * short window, one script call per node (`RenewalBatcher`), unless replicas must acknowledge
   * it or its keys span Cluster slots.
   * @returns false when the lock is no longer held by the token on a majority
   * @throws LockBackendError when too many nodes fail to tell
   */
  extend(
    keys: readonly string[],
    token: string,
    ttl: number,
    acks?: ReplicaAcks,
    share?: ShareArg,
    repairs = true,
    batched = false,
  ): Promise<boolean> {
    this.group.restarts.leaseInUse(ttl);
    const renewal: Renewal = { keys, token, ttl, acks, share, repairs, batched };
    return promiseFrom((done) => runExtend(this.group, this.renewals, renewal, done));
  }

  /**
   * Gives the keys of `token` back (compare-and-delete: never someone else's lock), granting
   * each to its oldest waiter queued in Redis (RELEASE; one key nobody waits for costs it a GET
   * and a DEL). A share (read hold, permit) is given back the same way. A grantee learns of its
   * grant from the grant message alone, whichever process it is in. Answered by callback (the
   * uncontended cycle releases through here): `published` tells whether racing waiters were
   * woken (a PUBLISH on some node); `error` is a LockBackendError when no majority of nodes could
   * be told.
   */
  releaseThen(
    keys: readonly string[],
    token: string,
    done: (error: unknown, published?: boolean) => void,
  ): void {
    if (this.group.single) return releaseOnOne(this.group, keys, token, done);
    runRelease(this.group, keys, token, done);
  }

  /**
   * The lock board's force release: frees `key` from `token` (read just before) on every node,
   * as a release of the holder would (FORCE_RELEASE: the key goes to its oldest queued waiter).
   * @returns whether some node freed it (false: that token held it nowhere any more)
   */
  async forceRelease(key: string, token: string): Promise<boolean> {
    const { nodes, space, runner, settings, fenceMode } = this.group;
    const keys = space.keySet(key).all;
    const freed = await Promise.all(
      nodes.map((node) =>
        runner.run(node, FORCE_RELEASE, keys, [token, settings.block, fenceMode]),
      ),
    );
    return freed.some((n) => n === 1);
  }

  /**
   * `releaseThen` as a promise.
   * @returns whether racing waiters were woken (a PUBLISH on some node)
   * @throws LockBackendError when no majority of nodes could be told
   */
  release(keys: readonly string[], token: string): Promise<boolean> {
    return promiseFrom((done) => this.releaseThen(keys, token, done));
  }

  /**
   * Releases by expiry (`minHold`): every key `token` still holds is left to expire in `ms`
   * instead of being deleted, on every node. Nobody is granted the keys or woken: waiters retry
   * when the lease they were told runs out.
   * @throws LockBackendError when no majority of nodes could be told (the keys then keep their
   *   lease, which expires by itself)
   */
  async letExpire(keys: readonly string[], token: string, ms: number): Promise<void> {
    this.group.restarts.leaseInUse(ms);
    const { space, runner } = this.group;
    const units = space.units(keys);
    const args: [string, number] = [token, Math.max(1, Math.ceil(ms))];
    const results = await this.group.onEvery((node) =>
      Promise.all(units.map((u) => runner.run(node, LET_EXPIRE, u, args))),
    );
    this.group.quorum.failIfNoMajority(keys, results, 'release');
  }

  /**
   * Everything `token` may hold or have queued, given back on every node at once (a caller that
   * gave up, or a lease nobody will use). Sent on each node's connection after whatever the
   * token sent before, so it also undoes an acquire still on its way.
   */
  abandon(keys: readonly string[], token: string): void {
    this.group.abandon(keys, token);
  }

  /**
   * Single node, a local waiter next: grant the key to the oldest waiter queued in Redis by
   * another process and queue `next` behind it, or, if nobody is queued, hand it to `next`.
   */
  async releaseTo(
    keys: readonly string[],
    token: string,
    next: NextCaller,
    acks?: ReplicaAcks,
  ): Promise<'granted' | 'notOurs' | Taken> {
    const start = performance.now();
    const { nodes, space, runner, settings, fenceMode } = this.group;
    const { block } = settings;
    const args: [string, string, number, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      Math.max(1, Math.ceil(next.remaining())),
      block,
      fenceMode,
    ];
    const reply = await runner.runAcked(nodes[0], RELEASE_TO, space.allKeys(keys), args, acks);
    if (reply.kind !== 'handed') return reply.kind;
    return { kind: 'ok', fences: [reply.fence], start, spare: block - 1, uncontended: false };
  }

  /**
   * Single node, one key `token` holds and passes in memory: `count` more fences for the next
   * callers of this process, and whether a live waiter of another process is queued.
   */
  refill(
    keys: readonly string[],
    token: string,
    count: number,
    acks?: ReplicaAcks,
  ): Promise<RefillReply> {
    const { nodes, space, runner, fenceMode } = this.group;
    const args: [string, number, FenceMode] = [token, count, fenceMode];
    return runner.runAcked(nodes[0], REFILL, space.allKeys(keys), args, acks);
  }

  /**
   * PASS_SHARE (single node, one key): the permit `token` holds passes to `next`, a waiter of
   * this process, in one round trip: the share stays the holder token's, renewed to `next`'s
   * lease, with a new fence; `next`'s queue entry goes. `pastOthers`: the pass went past a live
   * waiter of another process queued before `next`. Undefined when the share was lost.
   * @throws LockBackendError when the node fails
   */
  async passShare(
    keys: readonly string[],
    token: string,
    next: { readonly token: string; readonly ttl: number },
  ): Promise<{ taken: Taken; pastOthers: boolean } | undefined> {
    const start = performance.now();
    const { nodes, space, runner, fenceMode } = this.group;
    const args: [string, string, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      1,
      fenceMode,
    ];
    const { fence, pastOthers } = await runner
      .run(nodes[0], PASS_SHARE, space.allKeys(keys), args)
      .catch((e: unknown) => {
        throw new LockBackendError(keys, [asError(e)], 'release');
      });
    if (fence <= 0) return undefined;
    const taken: Taken = { kind: 'ok', fences: [fence], start, spare: 0, uncontended: false };
    return { taken, pastOthers };
  }

  /**
   * Swaps the owner token of `keys` from `token` to `next.token` in one script, minting new
   * fences. Undefined when `token` no longer held the keys on a majority, or the new lease would
   * already be over (the caller then releases publicly).
   */
  async handoff(
    keys: readonly string[],
    token: string,
    next: NextCaller,
    acks?: ReplicaAcks,
  ): Promise<Taken | undefined> {
    this.group.restarts.leaseInUse(next.ttl);
    const start = performance.now();
    const { space, runner, settings, quorum, fenceMode } = this.group;
    const args: [string, string, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      settings.block,
      fenceMode,
    ];
    const allKeys = space.allKeys(keys);
    const replies = await this.group.onEvery((node) =>
      runner.runAcked(node, HANDOFF, allKeys, args, acks),
    );
    const perNode: (readonly number[])[] = [];
    for (const r of replies) if (!(r instanceof Error) && r.kind === 'ok') perNode.push(r.fences);
    if (
      !quorum.reached(perNode.length) ||
      performance.now() >= start + next.ttl - settings.drift(next.ttl)
    ) {
      // A partial handoff (quorum only) must not leave the new token behind.
      if (perNode.length > 0) this.group.abandon(keys, next.token);
      return undefined;
    }
    const fences = await settleFences(this.group, keys, perNode);
    return { kind: 'ok', fences, start, spare: settings.block - 1, uncontended: false };
  }

  /** A lease of `ttl` ms is in use (see `NodeRestarts.leaseInUse`). */
  leaseInUse(ttl: number): void {
    this.group.restarts.leaseInUse(ttl);
  }

  /** Resolves once the nodes' servers connected so far are read (see `NodeRestarts`). */
  nodesConfirmed(): Promise<void> {
    return this.group.restarts.confirmed();
  }

  /** Stops following the nodes' restarts. */
  close(): void {
    this.group.restarts.close();
  }

  /** Whether a majority of nodes has the key locked right now. */
  async isLocked(key: string): Promise<boolean> {
    const { space, quorum } = this.group;
    const rk = space.lockKey(key);
    const votes = await this.group.onEvery(async (node) => (await node.exists(rk)) === 1);
    quorum.failIfNoMajority([key], votes, 'check');
    return quorum.reached(votes.filter((v) => v === true).length);
  }
}
