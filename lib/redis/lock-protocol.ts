import { performance } from 'node:perf_hooks';
import { LockBackendError } from '../errors';
import { type KeySpace, KEYS_PER_LOCK } from './key-space';
import { Ballot, Quorum } from './quorum';
import type { RedisNode } from './redis-node';
import { RenewalBatcher } from './renewal-batcher';
import { asError, type ReplicaAcks, type ScriptReplies, type ScriptRunner } from './script-runner';
import { promiseFrom } from '../settle-to';

export type { ReplicaAcks } from './script-runner';
import {
  ACQUIRE,
  ACQUIRE_SHARED,
  EXTEND,
  EXTEND_SHARED,
  type ExtendReply,
  type FenceMode,
  HANDOFF,
  LET_EXPIRE,
  PASS_SHARE,
  RAISE_FENCE,
  RELEASE,
  RELEASE_TO,
  REFILL,
  type RefillReply,
  type ReleaseGrantReply,
  type ReleaseReply,
  type Script,
  type ScriptArgs,
  type ShareArg,
  type SharedReply,
  TAKE_ANY,
  TRY,
} from './scripts';

/** RELEASE's arguments: token, leave, fences to reserve for a grant, fence mode. */
type ReleaseArgs = [string, '0' | '1', number, FenceMode];

/** A script that takes keys: ACQUIRE, or ACQUIRE_SHARED for read locks and permits. */
type AcquireScript = Script<ScriptArgs, SharedReply>;

/** What an acquire round took. */
export interface Taken {
  readonly kind: 'ok';
  /** One fence per key. */
  readonly fences: readonly number[];
  /** `performance.now()` when the round started: the lease runs from there. */
  readonly start: number;
  /** Fences reserved after the holder's (local handoffs without a round trip). */
  readonly spare: number;
  /** Taken by a first try with the key free. */
  readonly uncontended: boolean;
  /**
   * The lease the round set, when shorter than the taker's: a grant's claim window, which the
   * holder then renews to its full lease.
   */
  readonly ttl?: number;
  /**
   * A claim window held at once from a grant message: the holder's claim goes out before it
   * runs (not a third of the way into the window, as for a grant its own release answered).
   */
  readonly claimNow?: boolean;
}

/**
 * A lock or share granted by a release this process sent (single node): the waiter's token, its
 * fence, the spare fences after it, and whether a writer queued behind a read share.
 */
export type ReleaseGrant = ReleaseGrantReply;

/** An acquire round's outcome: taken, or busy with the holder's remaining lease. */
export type Outcome = Taken | { readonly kind: 'busy'; readonly pttl: number };

/**
 * A shared acquire round's outcome: also `conflict` when the key is held as another kind of
 * shared hold (`held`: 0 read, N permits of N).
 */
export type SharedOutcome = Outcome | { readonly kind: 'conflict'; readonly held: number };

/** One node's answer to an acquire: its reply, or the error that stands for its vote. */
type Vote = SharedReply | { readonly kind: 'error'; readonly error: Error };

/** A release's outcome on one node: whether it woke racing waiters, or the error. */
type Freed = boolean | Error;

/** What a local release asks of Redis for the next caller of this process. */
export interface NextCaller {
  readonly token: string;
  readonly ttl: number;
  /** Remaining wait in ms. */
  remaining(): number;
}

export interface LockProtocolSettings {
  /** Single node: waiters queue in Redis and releases grant (FIFO across processes). */
  readonly fair: boolean;
  /** Fences reserved per single-key lease on a fair group: the holder's and one per handoff. */
  readonly block: number;
  /** The drift allowance of a lease of `ttl` ms. */
  drift(ttl: number): number;
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
 * on the same connection, after the command it undoes.
 * @internal
 */
export class LockProtocol {
  readonly quorum: Quorum;
  /** Watchdog renewals due together, sent as one script call per node. */
  readonly renewals: RenewalBatcher;

  constructor(
    readonly nodes: readonly RedisNode[],
    readonly space: KeySpace,
    readonly runner: ScriptRunner,
    readonly settings: LockProtocolSettings,
    private readonly counters: ProtocolCounters,
  ) {
    this.quorum = new Quorum(nodes.length);
    this.renewals = new RenewalBatcher(runner, nodes.length > 1 ? '1' : '0');
  }

  /**
   * `attempt` with `waitMs` 0 on one key (a first try), answered by callback: on a single node
   * no promise is made, as the uncontended cycle's acquire goes through here.
   */
  firstTryThen(
    key: readonly string[],
    token: string,
    ttl: number,
    start: number,
    acks: ReplicaAcks | undefined,
    done: (error: unknown, outcome?: Outcome) => void,
  ): void {
    if (this.nodes.length === 1) {
      this.counters.attempts++;
      return this.firstTryOnOne(key, token, ttl, start, acks, done);
    }
    this.attempt(key, token, ttl, 0, start, acks).then(
      (outcome) => done(undefined, outcome),
      (e: unknown) => done(e),
    );
  }

  /**
   * One acquire round for `token`. `waitMs` > 0: the caller waits that long, so the round
   * queues it for a grant (fair groups, single key) or flags the key so a release publishes.
   * `waitMs` 0 with one key: a first try (TRY, the least Lua).
   * @throws LockBackendError when too many nodes fail for a quorum
   */
  attempt(
    keys: readonly string[],
    token: string,
    ttl: number,
    waitMs: number,
    start = performance.now(),
    acks?: ReplicaAcks,
  ): Promise<Outcome> {
    this.counters.attempts++;
    if (waitMs <= 0 && keys.length === 1) return this.firstTry(keys, token, ttl, start, acks);
    const units = this.space.units(keys);
    const wait = Math.ceil(waitMs);
    const queue = this.queues(units);
    const args: ScriptArgs = [
      token,
      ttl,
      wait,
      queue ? '1' : '0',
      queue ? this.settings.block : 1,
      this.fenceMode,
    ];
    const spare = queue ? this.settings.block - 1 : 0;
    return this.round(
      ACQUIRE,
      keys,
      units,
      token,
      ttl,
      args,
      start,
      spare,
      acks,
    ) as Promise<Outcome>;
  }

  /**
   * One acquire round of a shared hold (`share`: 'r' read, or N permits of N), as `attempt`
   * otherwise: `waitMs` > 0 queues the token (fair groups, single key) or flags the keys. A read
   * hold reserves no fence (it gets the counter's value); a permit mints one.
   * @throws LockBackendError when too many nodes fail for a quorum
   */
  attemptShared(
    keys: readonly string[],
    token: string,
    ttl: number,
    waitMs: number,
    share: ShareArg,
    start = performance.now(),
    acks?: ReplicaAcks,
  ): Promise<SharedOutcome> {
    this.counters.attempts++;
    const units = this.space.units(keys);
    const wait = waitMs > 0 ? Math.ceil(waitMs) : 0;
    const queue = wait > 0 && this.queues(units);
    const args: ScriptArgs = [
      token,
      ttl,
      wait,
      queue ? '1' : '0',
      share,
      1,
      this.fenceMode,
      this.settings.fair ? '1' : '0',
    ];
    // Permits on a quorum: every node must admit the holder. With a majority each node could
    // count its own N holders, and up to N * nodes / majority (1.5 N on 3 nodes) would hold at
    // once; a holder on every node bounds them to N.
    const everyNode = share !== 'r';
    return this.round(ACQUIRE_SHARED, keys, units, token, ttl, args, start, 0, acks, everyNode);
  }

  /** One acquire round of `script` over every node (see `attempt`). */
  private round(
    script: AcquireScript,
    keys: readonly string[],
    units: string[][],
    token: string,
    ttl: number,
    args: ScriptArgs,
    start: number,
    spare: number,
    acks: ReplicaAcks | undefined,
    everyNode = false,
  ): Promise<SharedOutcome> {
    if (this.nodes.length === 1) {
      const node = this.nodes[0];
      if (units.length === 1) {
        return this.acquireOnOne(script, keys, token, units[0], args, start, spare, acks);
      }
      return this.acquireUnits(script, node, units, token, args, acks).then((vote) =>
        this.onlyVote(keys, vote, start, 0, false),
      );
    }
    // Go on as soon as a majority agreed (or can no longer agree), as Redlock does: the slowest
    // node's answer is not waited for. What it took is undone (see `countVotes`).
    if (units.length === 1) {
      const need = everyNode ? this.nodes.length : this.quorum.size;
      const ballot = new AcquireBallot(this, keys, token, ttl, start, false, everyNode, need);
      return ballot.ask(script, units[0], args, acks);
    }
    return this.quorum.collect<RedisNode, Vote, SharedOutcome>(
      this.nodes,
      (node, answer, over) =>
        void this.acquireUnits(script, node, units, token, args, acks, over).then(answer),
      (v) => v.kind === 'ok',
      (votes) => this.countVotes(keys, token, ttl, start, votes, false, everyNode),
      everyNode ? this.nodes.length : this.quorum.size,
    );
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
    const scriptKeys: string[] = [];
    for (const key of keys) scriptKeys.push(...this.space.keySet(key).take);
    const start = performance.now();
    const node = this.nodes[0];
    const reply = await this.runner
      .runAcked(node, TAKE_ANY, scriptKeys, [token, ttl, this.settings.block, this.fenceMode], acks)
      .catch((e: unknown) => {
        this.undo(node, keys, token);
        throw new LockBackendError(keys, [asError(e)]);
      });
    if (reply.kind === 'busy') return reply.pttl;
    // A block of fences, as for a first try: the key can pass to our next caller in memory.
    const taken: Taken = {
      kind: 'ok',
      fences: [reply.fence],
      start,
      spare: this.settings.block - 1,
      uncontended: true,
    };
    return { index: reply.index, taken };
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
  async extend(
    keys: readonly string[],
    token: string,
    ttl: number,
    acks?: ReplicaAcks,
    share?: ShareArg,
    repairs = true,
    batched = false,
  ): Promise<boolean> {
    const repair = repairs && this.nodes.length > 1 ? '1' : '0';
    // Exclusive holds with the group's repair rule only: shared holds renew with their own script.
    const lockKeys =
      batched && !acks && !share && repairs ? this.space.lockKeysInOneUnit(keys) : undefined;
    const votes = await this.quorum.collect<RedisNode, ExtendReply | Error>(
      this.nodes,
      (node, answer) =>
        lockKeys
          ? this.renewals.add(node, lockKeys, token, ttl, answer)
          : void this.extendOn(node, keys, token, ttl, repair, acks, share).then(
              answer,
              (e: unknown) => answer(asError(e)),
            ),
      (v) => v === 'renewed',
    );
    if (this.quorum.reached(votes.filter((v) => v === 'renewed').length)) return true;
    this.nodes.forEach((node, i) => {
      if (votes[i] === 'repaired' || votes[i] === undefined) this.undo(node, keys, token);
    });
    this.failIfNoMajority(keys, votes, 'extend');
    return false;
  }

  /**
   * Gives the keys of `token` back (compare-and-delete: never someone else's lock), granting
   * each to its oldest waiter queued in Redis (RELEASE; one key nobody waits for costs it a GET
   * and a DEL). A share (read hold, permit) is given back the same way. `onGrants` (single node)
   * hears what the release granted (locks and shares, to queued waiters of any process), as soon
   * as its answer comes, so a grantee of this process can hold without waiting for the grant
   * message.
   * @returns whether racing waiters were woken (a PUBLISH on some node)
   * @throws LockBackendError when no majority of nodes could be told
   */
  release(
    keys: readonly string[],
    token: string,
    onGrants?: (grants: readonly ReleaseGrant[]) => void,
  ): Promise<boolean> {
    if (this.nodes.length === 1) {
      return promiseFrom<boolean>((done) => this.releaseThen(keys, token, onGrants, done));
    }
    const unit = this.space.oneUnit(keys);
    if (unit) return new ReleaseBallot(this, keys, token, unit).ask();
    const conclude = (results: (Freed | undefined)[]): boolean => {
      this.failIfNoMajority(keys, results, 'release');
      return results.some((r) => r === true);
    };
    return this.quorum.collect<RedisNode, Freed, boolean>(
      this.nodes,
      (node, answer) => this.releaseOn(node, keys, token, undefined, answer),
      (r) => !(r instanceof Error),
      conclude,
    );
  }

  /**
   * `release` answered by callback: on a single node no promise is made (the uncontended cycle
   * releases through here). `published`: whether racing waiters were woken.
   */
  releaseThen(
    keys: readonly string[],
    token: string,
    onGrants: ((grants: readonly ReleaseGrant[]) => void) | undefined,
    done: (error: LockBackendError | undefined, published: boolean) => void,
  ): void {
    if (this.nodes.length !== 1) {
      this.release(keys, token, onGrants).then(
        (published) => done(undefined, published),
        (e: unknown) => done(e as LockBackendError, false),
      );
      return;
    }
    // The only node decides: its error is the failure (as `failIfNoMajority` on one node).
    this.releaseOn(this.nodes[0], keys, token, onGrants, (r) =>
      r instanceof Error
        ? done(new LockBackendError(keys, [r], 'release'), false)
        : done(undefined, r),
    );
  }

  /**
   * Releases by expiry (`minHold`): every key `token` still holds is left to expire in `ms`
   * instead of being deleted, on every node. Nobody is granted the keys or woken: waiters retry
   * when the lease they were told runs out.
   * @throws LockBackendError when no majority of nodes could be told (the keys then keep their
   *   lease, which expires by itself)
   */
  async letExpire(keys: readonly string[], token: string, ms: number): Promise<void> {
    const units = this.space.units(keys);
    const args: [string, number] = [token, Math.max(1, Math.ceil(ms))];
    const results = await this.onNodes((node) =>
      Promise.all(units.map((u) => this.runner.run(node, LET_EXPIRE, u, args))),
    );
    this.failIfNoMajority(keys, results, 'release');
  }

  /**
   * Everything `token` may hold or have queued, given back on every node at once (a caller that
   * gave up, or a lease nobody will use). Sent on each node's connection after whatever the
   * token sent before, so it also undoes an acquire still on its way.
   */
  abandon(keys: readonly string[], token: string): void {
    for (const node of this.nodes) this.undo(node, keys, token);
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
    const { block } = this.settings;
    const args: [string, string, number, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      Math.max(1, Math.ceil(next.remaining())),
      block,
      this.fenceMode,
    ];
    const node = this.nodes[0];
    const reply = await this.runner.runAcked(
      node,
      RELEASE_TO,
      this.space.allKeys(keys),
      args,
      acks,
    );
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
    const args: [string, number, FenceMode] = [token, count, this.fenceMode];
    return this.runner.runAcked(this.nodes[0], REFILL, this.space.allKeys(keys), args, acks);
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
    const args: [string, string, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      1,
      this.fenceMode,
    ];
    const { fence, pastOthers } = await this.runner
      .run(this.nodes[0], PASS_SHARE, this.space.allKeys(keys), args)
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
    const start = performance.now();
    const args: [string, string, number, number, FenceMode] = [
      token,
      next.token,
      next.ttl,
      this.settings.block,
      this.fenceMode,
    ];
    const allKeys = this.space.allKeys(keys);
    const replies = await this.onNodes((node) =>
      this.runner.runAcked(node, HANDOFF, allKeys, args, acks),
    );
    const perNode: (readonly number[])[] = [];
    for (const r of replies) if (!(r instanceof Error) && r.kind === 'ok') perNode.push(r.fences);
    if (
      !this.quorum.reached(perNode.length) ||
      performance.now() >= start + next.ttl - this.settings.drift(next.ttl)
    ) {
      // A partial handoff (quorum only) must not leave the new token behind.
      if (perNode.length > 0) this.abandon(keys, next.token);
      return undefined;
    }
    const fences = await this.settleFences(keys, perNode);
    return { kind: 'ok', fences, start, spare: this.settings.block - 1, uncontended: false };
  }

  /** Whether a majority of nodes has the key locked right now. */
  async isLocked(key: string): Promise<boolean> {
    const rk = this.space.lockKey(key);
    const votes = await this.onNodes(async (node) => (await node.exists(rk)) === 1);
    this.failIfNoMajority([key], votes, 'check');
    return this.quorum.reached(votes.filter((v) => v === true).length);
  }

  // ---------------------------------------------------------------- acquire rounds

  /** Single key on a fair group: the round queues the token for a grant. */
  private queues(units: string[][]): boolean {
    return this.settings.fair && units.length === 1 && units[0].length === KEYS_PER_LOCK;
  }

  /**
   * A first try for one key: it neither queues nor flags, so TRY with the lock and fence keys
   * only. Quorum groups reserve one fence (block 1): no local handoff without a round trip there.
   */
  private firstTry(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
    acks: ReplicaAcks | undefined,
  ): Promise<Outcome> {
    if (this.nodes.length === 1) {
      return promiseFrom<Outcome>((done) =>
        this.firstTryOnOne(keys, token, ttl, start, acks, done),
      );
    }
    const take = this.space.keySet(keys[0]).take;
    const args: [string, number, number, FenceMode] = [
      token,
      ttl,
      this.settings.block,
      this.fenceMode,
    ];
    const ballot = new AcquireBallot(this, keys, token, ttl, start, true, false, this.quorum.size);
    return ballot.ask(TRY, take, args, acks) as Promise<Outcome>;
  }

  /** TRY on the only node, answered by callback (no promise: the uncontended cycle's path). */
  private firstTryOnOne(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
    acks: ReplicaAcks | undefined,
    done: (error: LockBackendError | undefined, outcome?: Outcome) => void,
  ): void {
    const node = this.nodes[0];
    const { block } = this.settings;
    const args: [string, number, number, FenceMode] = [token, ttl, block, this.fenceMode];
    this.runner.sendAcked(node, TRY, this.space.keySet(keys[0]).take, args, acks, (e, r) => {
      if (e) {
        this.undo(node, keys, token);
        return done(new LockBackendError(keys, [e]));
      }
      done(undefined, this.onlyVote(keys, r!, start, block - 1, true) as Outcome);
    });
  }

  /** ACQUIRE on the only node, one unit: its reply is the outcome (an error rejects). */
  private acquireOnOne(
    script: AcquireScript,
    keys: readonly string[],
    token: string,
    unit: string[],
    args: ScriptArgs,
    start: number,
    spare: number,
    acks: ReplicaAcks | undefined,
  ): Promise<SharedOutcome> {
    return new Promise((resolve, reject) => {
      this.acquireOn(script, this.nodes[0], unit, token, args, acks, (vote) => {
        try {
          resolve(this.onlyVote(keys, vote, start, spare, false));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  /** A single node's vote as the outcome. @throws LockBackendError for an error vote */
  private onlyVote(
    keys: readonly string[],
    vote: Vote,
    start: number,
    spare: number,
    uncontended: boolean,
  ): SharedOutcome {
    if (vote.kind === 'error') throw new LockBackendError(keys, [vote.error]);
    if (vote.kind !== 'ok') return vote;
    return { kind: 'ok', fences: vote.fences, start, spare, uncontended };
  }

  /** One node's ACQUIRE vote, to `answer` (an error is a vote too, its effect undone). */
  private acquireOn(
    script: AcquireScript,
    node: RedisNode,
    unit: string[],
    token: string,
    args: ScriptArgs,
    acks: ReplicaAcks | undefined,
    answer: (vote: Vote) => void,
  ): void {
    this.runner.sendAcked(node, script, unit, args, acks, (e, r) => {
      if (!e) return answer(r!);
      this.undoUnits(node, [unit], token);
      answer({ kind: 'error', error: e });
    });
  }

  /**
   * Redis Cluster, several keys: one script per key, in sorted order, undone on a refusal. On a
   * quorum (`over`: whether the round's vote is over), a node still at it when the round is over
   * stops there: the round's outcome already undid (or will release) what the node may hold,
   * and an undo sent now could land after a later attempt of the same token and take its keys
   * away.
   */
  private async acquireUnits(
    script: AcquireScript,
    node: RedisNode,
    units: string[][],
    token: string,
    args: ScriptArgs,
    acks: ReplicaAcks | undefined,
    over: () => boolean = NEVER_OVER,
  ): Promise<Vote> {
    const fences: number[] = [];
    for (let u = 0; u < units.length; u++) {
      if (over()) return { kind: 'error', error: new Error(ROUND_OVER) };
      let reply: SharedReply;
      try {
        reply = await this.runner.runAcked(node, script, units[u], args, acks);
      } catch (e) {
        if (!over()) this.undoUnits(node, units.slice(0, u + 1), token);
        return { kind: 'error', error: asError(e) };
      }
      if (reply.kind !== 'ok') {
        if (u > 0 && !over()) this.undoUnits(node, units.slice(0, u), token);
        return reply;
      }
      fences.push(...reply.fences);
    }
    return { kind: 'ok', fences };
  }

  /** The outcome of a quorum acquire round, from the votes in so far (also for the ballots). */
  countVotes(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
    votes: (Vote | undefined)[],
    uncontended: boolean,
    everyNode = false,
  ): SharedOutcome | Promise<Taken> {
    const need = everyNode ? this.nodes.length : this.quorum.size;
    const perNode: (readonly number[])[] = [];
    for (const v of votes) if (v?.kind === 'ok') perNode.push(v.fences);
    const validity = ttl - (performance.now() - start) - this.settings.drift(ttl);
    if (perNode.length >= need && validity > 0) {
      // Every node had to agree (permits): the first node minted every holder's fence, in the
      // order it admitted them, so those are unique and increasing. The largest of each node's
      // (a majority's rule) could repeat: two holders minting on the nodes in different orders.
      if (everyNode) return quorumTaken(perNode[0], start, uncontended);
      const settled = this.settleFences(keys, perNode);
      return settled instanceof Promise
        ? settled.then((fences) => quorumTaken(fences, start, uncontended))
        : quorumTaken(settled, start, uncontended);
    }
    // No quorum: give back what we took, also on nodes whose answer is still out (errors were
    // undone when they came in).
    this.nodes.forEach((node, i) => {
      const v = votes[i];
      if (v === undefined || v.kind === 'ok') this.undo(node, keys, token);
    });
    const errors: Error[] = [];
    let pttl: number | undefined;
    let conflict: SharedOutcome | undefined;
    for (const v of votes) {
      if (v?.kind === 'error') errors.push(v.error);
      else if (v?.kind === 'busy') pttl = pttl === undefined ? v.pttl : Math.min(pttl, v.pttl);
      else if (v?.kind === 'conflict') conflict = v;
    }
    if (errors.length > this.nodes.length - need) throw new LockBackendError(keys, errors);
    return conflict ?? { kind: 'busy', pttl: pttl ?? 0 };
  }

  /**
   * Quorum only: nodes that disagree on a fence get raised to the largest one before the holder
   * runs, so the next holder's fence is larger on every majority. Nodes in step (the usual case)
   * cost nothing.
   */
  private settleFences(
    keys: readonly string[],
    perNode: (readonly number[])[],
  ): readonly number[] | Promise<readonly number[]> {
    const first = perNode[0];
    let inStep = true;
    for (let n = 1; n < perNode.length && inStep; n++) {
      const nodeFences = perNode[n];
      for (let i = 0; i < first.length; i++) if (nodeFences[i] !== first[i]) inStep = false;
    }
    // In step (the usual case): every node's fences are the same, nothing to copy or raise.
    if (inStep) return first;
    const fences = first.slice();
    for (let n = 1; n < perNode.length; n++) {
      const nodeFences = perNode[n];
      for (let i = 0; i < fences.length; i++) {
        if (nodeFences[i] > fences[i]) fences[i] = nodeFences[i];
      }
    }
    const allKeys = this.space.allKeys(keys);
    return this.onNodes((node) => this.runner.run(node, RAISE_FENCE, allKeys, fences)).then(
      () => fences,
    );
  }

  // ---------------------------------------------------------------- releases and renewals

  private async extendOn(
    node: RedisNode,
    keys: readonly string[],
    token: string,
    ttl: number,
    repair: '0' | '1',
    acks: ReplicaAcks | undefined,
    share: ShareArg | undefined,
  ): Promise<ExtendReply> {
    const replies = await Promise.all(
      this.space
        .units(keys)
        .map((u) =>
          share === undefined
            ? this.runner.runAcked(node, EXTEND, u, [token, ttl, repair], acks)
            : this.runner.runAcked(node, EXTEND_SHARED, u, [token, ttl, repair, share], acks),
        ),
    );
    if (replies.includes('lost')) return 'lost';
    return replies.includes('repaired') ? 'repaired' : 'renewed';
  }

  /** Releases `token`'s keys on one node: whether it published a wake-up, or the error. */
  private releaseOn(
    node: RedisNode,
    keys: readonly string[],
    token: string,
    onGrants: ((grants: readonly ReleaseGrant[]) => void) | undefined,
    answer: (r: Freed) => void,
  ): void {
    const units = this.space.units(keys);
    const args: ReleaseArgs = [token, '0', this.settings.block, this.fenceMode];
    if (units.length === 1) {
      this.runner.send(node, RELEASE, units[0], args, (e, r) => {
        if (r && r.grants.length > 0) onGrants?.(r.grants);
        answer(e ?? r!.published > 0);
      });
      return;
    }
    Promise.all(units.map((u) => this.runner.run(node, RELEASE, u, args))).then(
      (replies) => {
        const grants = replies.flatMap((r) => r.grants);
        if (grants.length > 0) onGrants?.(grants);
        answer(replies.some((r) => r.published > 0));
      },
      (e: unknown) => answer(asError(e)),
    );
  }

  /**
   * Gives back what `token` holds or has queued on one node (fire and forget). Also for the
   * ballots.
   */
  undo(node: RedisNode, keys: readonly string[], token: string): void {
    this.undoUnits(node, this.space.units(keys), token);
  }

  private undoUnits(node: RedisNode, units: string[][], token: string): void {
    for (const unit of units) {
      this.runner
        .run(node, RELEASE, unit, [token, '1', this.settings.block, this.fenceMode])
        .catch(() => undefined);
    }
  }

  /**
   * How the scripts mint fences: on a single node also above the server's clock (a promoted
   * replica may hold an older counter); a quorum counts only (its nodes' clocks differ, and a
   * missing counter is seeded). Also for the ballots.
   */
  get fenceMode(): FenceMode {
    return this.settings.fair ? 'clock' : 'count';
  }

  /**
   * Also for the ballots.
   * @throws LockBackendError when the nodes that failed (their answer an Error) leave no
   *   majority possible
   */
  failIfNoMajority(keys: readonly string[], answers: unknown[], operation: string): void {
    const errors = answers.filter((a): a is Error => a instanceof Error);
    if (this.quorum.impossible(errors.length)) throw new LockBackendError(keys, errors, operation);
  }

  /** Runs `fn` on every node; an error becomes the node's answer. */
  private onNodes<T>(fn: (node: RedisNode) => Promise<T>): Promise<(T | Error)[]> {
    return Promise.all(
      this.nodes.map((node) =>
        fn(node).then(
          (v) => v,
          (e: unknown) => asError(e),
        ),
      ),
    );
  }
}

/** `over` of a round that has no vote (a single node): never over while its node is asked. */
const NEVER_OVER = (): boolean => false;

/** A node's vote when the round was over before it sent all its units (never counted). */
const ROUND_OVER = 'the round was over before this node was asked for every key';

/** A quorum round's lease: no spare fences (no local handoff without a round trip there). */
function quorumTaken(fences: readonly number[], start: number, uncontended: boolean): Taken {
  return { kind: 'ok', fences, start, spare: 0, uncontended };
}

/**
 * A quorum acquire round on one unit of keys (one script per node): each node's reply is its
 * vote, an error a vote against whose effect is undone at once; the outcome is
 * `LockProtocol.countVotes`'. One object per round, its replies told apart by node index.
 */
class AcquireBallot extends Ballot<Vote, SharedOutcome> implements ScriptReplies<SharedReply> {
  constructor(
    private readonly protocol: LockProtocol,
    private readonly keys: readonly string[],
    private readonly token: string,
    private readonly ttl: number,
    private readonly start: number,
    private readonly uncontended: boolean,
    private readonly everyNode: boolean,
    need: number,
  ) {
    super(protocol.nodes.length, need);
  }

  /** Sends `script` to every node at once. */
  ask(
    script: AcquireScript,
    scriptKeys: readonly string[],
    args: ScriptArgs,
    acks: ReplicaAcks | undefined,
  ): Promise<SharedOutcome> {
    const { nodes, runner } = this.protocol;
    for (let i = 0; i < nodes.length; i++) {
      if (!acks) runner.sendTo(nodes[i], script, scriptKeys, args, this, i);
      else
        runner.sendAcked(nodes[i], script, scriptKeys, args, acks, (e, r) =>
          this.answered(i, e, r),
        );
    }
    return this.promise;
  }

  answered(i: number, error: Error | undefined, reply: SharedReply | undefined): void {
    if (!error) return this.vote(i, reply!);
    // An error after the round was over (a command timed out on a node that answered late) is
    // not undone here: the outcome undid the nodes still out when it came (or the holder's
    // release frees them), and an undo sent now would land after the token's next attempt on
    // that node's connection, taking away a key that attempt counts as held.
    if (!this.over) this.protocol.undo(this.protocol.nodes[i], this.keys, this.token);
    this.vote(i, { kind: 'error', error });
  }

  protected yes(vote: Vote): boolean {
    return vote.kind === 'ok';
  }

  protected conclude(votes: (Vote | undefined)[]): SharedOutcome | Promise<SharedOutcome> {
    const { keys, token, ttl, start, uncontended, everyNode } = this;
    return this.protocol.countVotes(keys, token, ttl, start, votes, uncontended, everyNode);
  }
}

/**
 * A quorum release of one unit of keys: `RELEASE` on every node. A node's answer is whether it
 * published a wake-up, or its error; a majority of errors fails the release.
 */
class ReleaseBallot extends Ballot<Freed, boolean> implements ScriptReplies<ReleaseReply> {
  constructor(
    private readonly protocol: LockProtocol,
    private readonly keys: readonly string[],
    private readonly token: string,
    /** The script keys of RELEASE. */
    private readonly unit: string[],
  ) {
    super(protocol.nodes.length, protocol.quorum.size);
  }

  ask(): Promise<boolean> {
    const { nodes, runner, settings, fenceMode } = this.protocol;
    const args: ReleaseArgs = [this.token, '0', settings.block, fenceMode];
    for (let i = 0; i < nodes.length; i++)
      runner.sendTo(nodes[i], RELEASE, this.unit, args, this, i);
    return this.promise;
  }

  answered(slot: number, error: Error | undefined, reply: ReleaseReply | undefined) {
    this.vote(slot, error ?? reply!.published > 0);
  }

  protected yes(freed: Freed): boolean {
    return !(freed instanceof Error);
  }

  protected conclude(results: (Freed | undefined)[]): boolean {
    this.protocol.failIfNoMajority(this.keys, results, 'release');
    for (const r of results) if (r === true) return true;
    return false;
  }
}
