import { setMaxListeners } from 'node:events';
import type { OrderEdgeStore } from '../core/order-edge-store';
import { RedisOrderEdges } from './redis-order-edges';
import { performance } from 'node:perf_hooks';
import NodeRedlock from 'redlock';
import type { Redlock } from '../interfaces/redlock.interface';
import { pingNode } from './protocol/node-ping';
import type { RedisConnections } from './protocol/redis-connections';
import { LockNotAcquiredError } from '../errors';
import type { BoardSource } from '../core/board-source';
import { KeySpace } from './protocol/key-space';
import { LockNotifier } from './protocol/lock-notifier';
import { LockProtocol, type ReplicaAcks, type Taken } from './protocol/lock-protocol';
import { RedisBoardSource } from './redis-board-source';
import { isCluster, type RedisNode } from './protocol/redis-node';
import { ScriptRunner } from './protocol/script-runner';
import { WriteBatching } from './protocol/write-batching';
import { promiseFrom, settleTo } from '../settle-to';
import { Grants } from './grants';
import type { KeyLine } from './key-line';
import { KeyLines } from './key-lines';
import { ALL_POLICIES, type EnginePolicies } from './engine-policies';
import { type RedisLease, type RedisTaker, RedisLeases } from './redis-lease';
import { type MultiKeyWaitContext, waitForKeys } from './multi-key-wait';
import {
  type EngineCore,
  handoffEngine,
  keysWaitContext,
  lineWaitContext,
  sharedHoldsEngine,
} from './engine-wiring';
import { LocalHandoffs } from './local-handoffs';
import { SharedHolds } from './shared-holds';
import { shareArg } from './shared-wait';
import { Tokens } from './tokens';
import {
  type AcquireRequest,
  type BackendHealth,
  type LocalWait,
  type LockBackend,
  type LockCounts,
  noCounts,
} from '../core/lock-backend';
import { type LineWaitContext, Waiter } from './waiter';
import { WakeUps } from './wake-ups';

export type { RedisLease } from './redis-lease';
export type { RedisNode } from './protocol/redis-node';

/** @internal */
export interface RedisBackendSettings {
  keyPrefix: string;
  driftFactor: number;
  localHandoffs: number;
  commandTimeout: number;
  /** The group's default lease in ms (`ttl`): where the longest lease in use starts. */
  ttl?: number;
  /** Fast paths switched on (absent: all of them). See `EnginePolicies`. */
  policies?: EnginePolicies;
  /** Why a node cannot be used, when known better than by a command's error (see ScriptRunner). */
  connectionError?: (node: RedisNode) => Error | undefined;
  /**
   * The group's connections, when the backend was built from the options (`redisBackend`): it
   * opens them at `start`, checks them in `health` and closes the ones it opened in `close`.
   * Absent when the caller manages the nodes itself.
   */
  connections?: RedisConnections;
}

/**
 * The Redis backend of one lock group: take, renew and give back leases on one node or a
 * Redlock quorum. It coordinates; the parts do the work:
 * - `KeyLine` (per key: local holds, the FIFO of waiting callers, first tries in flight),
 *   `Waiter` / `waitForKeys` (one caller's wait), `RedisLeases` (lease arithmetic), `Tokens`;
 * - `Grants` (a grant reaching its waiter, which claims it),
 *   `WakeUps` (how waits hear releases and grants);
 * - `LocalHandoffs` (a freed key to the next caller of this process), `SharedHolds` (read holds
 *   and permits, with their own waits and passes), each given only what it needs of this
 *   class (`engine-wiring.ts`);
 * - `LockProtocol` (rounds over the nodes, Redlock's quorum rules, undoing what a round cannot
 *   keep), `KeySpace` (every Redis name), `ScriptRunner`, `LockNotifier` (subscriptions).
 * Single-node groups queue waiters in Redis and grant on release (FIFO across processes);
 * quorum groups race, woken by a PUBLISH. A release hands the key to the next caller of this
 * process when one waits (at most `localHandoffs` times in a row), in memory when it can.
 * @internal
 */
export class RedisLockBackend implements LockBackend<RedisLease> {
  readonly stats: LockCounts = noCounts();
  readonly notifier: LockNotifier;
  /** Where the group's instances share their lock-order edges. */
  readonly orderEdges: OrderEdgeStore;
  private readonly space: KeySpace;
  private readonly runner: ScriptRunner;
  private readonly protocol: LockProtocol;
  private readonly leases: RedisLeases;
  private readonly tokens = new Tokens();
  private readonly lines = new KeyLines<Waiter>();
  /** Single node: waiters queue in Redis and releases grant. */
  private readonly fair: boolean;
  private closed = false;
  /** Aborted on close: every wait of several keys or shared ends with a LockBackendError. */
  private readonly closing = new AbortController();
  private readonly lineWait: LineWaitContext;
  private readonly keysWait: MultiKeyWaitContext;
  /** Read holds and permits: their waits, grants and passes. */
  private readonly shared: SharedHolds;
  /** Passing a freed key to the next caller of this process (exclusive holds). */
  private readonly handoffs: LocalHandoffs;
  /** How waits hear releases and grants. */
  private readonly wakeUps: WakeUps;
  /** The fast paths this engine takes (all but in the differential test and the bench). */
  private readonly policies: EnginePolicies;
  /** Where a grant goes: to its waiter, which claims it. */
  private readonly grants: Grants;
  /** The node-redlock instance of `redlock()`, once asked for. */
  private redlocks?: Redlock;

  constructor(
    readonly name: string,
    readonly nodes: readonly RedisNode[],
    private readonly settings: RedisBackendSettings,
    onSubscriberError: (error: Error) => void,
  ) {
    this.fair = nodes.length === 1;
    this.policies = settings.policies ?? ALL_POLICIES;
    this.space = new KeySpace(settings.keyPrefix, nodes.some(isCluster));
    this.runner = new ScriptRunner(
      settings.commandTimeout,
      settings.connectionError,
      this.policies.writeBatching ? new WriteBatching() : undefined,
    );
    this.leases = new RedisLeases(settings.driftFactor);
    this.protocol = new LockProtocol(
      nodes,
      this.space,
      this.runner,
      {
        // Fences reserved per single-key lease: the holder's and one per possible local handoff.
        block: this.fair ? settings.localHandoffs + 1 : 1,
        drift: (ttl) => this.leases.drift(ttl),
        ttl: settings.ttl ?? 0,
        commandTimeout: settings.commandTimeout,
      },
      this.stats,
    );
    const { space, protocol, tokens, lines, stats } = this;
    this.grants = new Grants({ space, protocol, tokens, lines, stats, shared: () => this.shared });
    this.notifier = new LockNotifier(
      nodes,
      onSubscriberError,
      KeySpace.grantChannel(this.tokens.prefix),
      (message) => this.grants.message(message),
    );
    this.wakeUps = new WakeUps(this.notifier, this.space, this.stats, settings.commandTimeout);
    // Every wait in progress listens for the close: thousands at once are normal, not a leak.
    setMaxListeners(0, this.closing.signal);
    const core = this.core();
    this.lineWait = lineWaitContext(core);
    this.keysWait = keysWaitContext(core);
    this.shared = new SharedHolds(sharedHoldsEngine(core, this.keysWait));
    this.handoffs = new LocalHandoffs(handoffEngine(core));
    this.orderEdges = new RedisOrderEdges(nodes, settings.keyPrefix);
  }

  /** The prefix of every token of this group in this process (what its grant channel is named by). */
  get tokenPrefix(): string {
    return this.tokens.prefix;
  }

  /** The lock board's reads and force release on this group (`nest-locked/board` only). */
  boardSource(): BoardSource {
    return new RedisBoardSource({
      name: this.name,
      nodes: this.nodes,
      space: this.space,
      owner: () => this.tokenPrefix,
      forceRelease: (key, token) => this.protocol.forceRelease(key, token),
    });
  }

  /** Nodes whose majority decides. */
  get quorum(): number {
    return this.protocol.quorum.size;
  }

  /**
   * `start` bounds each of its steps itself (connect, reading the nodes' servers, the eviction
   * check), and logs each node it cannot reach: the module does not bound it again.
   */
  readonly startTimeout = Infinity;

  /** Usable before `start` when every node is an instance the app passed in (connected by it). */
  get usableBeforeStart(): boolean {
    return !this.settings.connections?.ownsAny;
  }

  /**
   * Opens the connections (each within 2 x commandTimeout, at least 1 s), then reads the
   * nodes' servers, so a quorum's nodes vote from the first lock (Redlock's restart rule; each
   * read is bounded by commandTimeout), and warns about a node that may evict keys.
   */
  async start(): Promise<void> {
    const connections = this.settings.connections;
    await connections?.open(Math.max(1_000, 2 * this.settings.commandTimeout));
    await this.nodesConfirmed();
    await connections?.warnIfEvicting();
  }

  /** Every node's PING within `timeout` ms; a majority of the nodes must answer. */
  async health(timeout: number): Promise<BackendHealth> {
    const connections = this.settings.connections;
    const nodes = await Promise.all(
      this.nodes.map((node) =>
        pingNode(node, timeout, connections && ((n) => connections.connectionError(n))),
      ),
    );
    return { quorum: this.quorum, nodes };
  }

  /** `listener` is told each time a connection to a node is ready again. */
  onReconnect(listener: () => void): void {
    this.settings.connections?.onReady(listener);
  }

  /** The group's node-redlock instance over its nodes (`@InjectRedlock`), built on first use. */
  redlock(): Redlock {
    this.redlocks ??= new NodeRedlock([...this.nodes]);
    return this.redlocks;
  }

  /** Release channels listened to right now. */
  get subscriptions(): number {
    return this.notifier.size;
  }

  /** Key lines alive (for tests: none once every caller left). */
  get queueCount(): number {
    let shared = 0;
    for (const key of this.shared.keys()) if (!this.lines.get(key)) shared++;
    return this.lines.size + shared;
  }

  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number {
    return this.lines.get(key)?.length ?? 0;
  }

  /** Whether a caller of this process holds `key` (single-key holds, lease still valid). */
  holds(key: string): boolean {
    return this.lines.get(key)?.heldHere() ?? false;
  }

  /** Whether `tryAcquireAny` can sweep many keys in one round trip (one node, no Cluster). */
  get canTakeAny(): boolean {
    return this.nodes.length === 1 && !isCluster(this.nodes[0]);
  }

  /**
   * Takes every key (sorted, deduplicated by the caller), waiting up to `waitTimeout` ms.
   * `signal` ends the wait early, rejecting with its reason. `seenBusy`: the caller has just
   * found the key busy (a segmented sweep), so it goes straight into line, without a first try
   * (its first attempt in line takes the key or queues for it, in one round trip).
   * @throws LockNotAcquiredError when still busy at the deadline
   * @throws LockBackendError when too many nodes fail for a quorum, or the client closes
   */
  acquire(keys: readonly string[], request: AcquireRequest): Promise<RedisLease> {
    if (request.share !== undefined) return this.shared.acquire(keys, request, request.share);
    try {
      return this.acquireExclusive(keys, request);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `acquire` of the exclusive lock. Not async (a synchronous throw is turned into a rejection
   * by `acquire`): the uncontended first try of one key costs one promise, answered by callback.
   */
  private acquireExclusive(keys: readonly string[], request: AcquireRequest): Promise<RedisLease> {
    const { ttl, waitTimeout, signal, acks } = request;
    const taker = this.taker(ttl, acks);
    const { startedAt } = taker;
    const deadline = startedAt + waitTimeout;
    if (signal?.aborted) throw signal.reason;
    if (keys.length !== 1) return this.acquireAll(keys, taker, waitTimeout, deadline, signal);
    const waits = waitTimeout > 0;
    const existing = this.lines.get(keys[0]);
    if (existing?.occupied()) {
      // Someone of ours holds, waits for or is trying this key: queue behind them instead of
      // competing (a burst of callers sends one try, not one each).
      if (waits)
        return new Waiter(this.lineWait, existing, keys, taker, deadline, signal, false).lease;
      if (existing.heldHere()) {
        // Held here and no wait wanted: busy for sure, no round trip needed.
        throw new LockNotAcquiredError(keys, 0, existing.holdsEnd() - performance.now());
      }
    }
    const line = existing ?? this.lines.add(keys[0]);
    if (request.seenBusy && waits) {
      return new Waiter(this.lineWait, line, keys, taker, deadline, signal, true).lease;
    }
    line.startTry();
    return new Promise((resolve, reject) => {
      // The first try neither queues nor flags: only a waiting caller asks to be woken.
      this.protocol.firstTryThen(keys, taker.token, ttl, startedAt, acks, waits, (error, first) => {
        if (error !== undefined) {
          this.lines.tryEnded(line);
          return reject(error);
        }
        if (first!.kind === 'ok') {
          // Counted as held before the try ends, so the callers queued behind wait for a handoff.
          let lease: RedisLease;
          try {
            lease = this.hold(keys, taker, first!, line);
          } catch (err) {
            this.lines.tryEnded(line);
            return reject(err);
          }
          this.lines.tryEnded(line);
          return resolve(lease);
        }
        if (!waits || performance.now() >= deadline) {
          this.lines.tryEnded(line);
          return reject(new LockNotAcquiredError(keys, performance.now() - startedAt, first!.pttl));
        }
        // First in line: ahead of the callers that queued behind this try.
        line.endTry();
        resolve(new Waiter(this.lineWait, line, keys, taker, deadline, signal, true).lease);
      });
    });
  }

  /** Several keys: one try at all of them, then a race for each (`waitForKeys`). */
  private async acquireAll(
    keys: readonly string[],
    taker: RedisTaker,
    waitTimeout: number,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<RedisLease> {
    const { token, ttl, startedAt, acks } = taker;
    const waits = waitTimeout > 0;
    const first = await this.protocol.attempt(keys, token, ttl, 0, startedAt, acks, waits);
    if (first.kind === 'ok') return this.hold(keys, taker, first);
    if (waitTimeout <= 0) throw new LockNotAcquiredError(keys, 0, first.pttl);
    return waitForKeys(this.keysWait, keys, taker, deadline, signal);
  }

  /**
   * One try, no waiting, no error object on contention (cheap enough for sweeps over many
   * keys): the lease, or the busy holder's remaining lease in ms.
   * @throws LockBackendError when too many nodes fail for a quorum
   */
  async tryAcquire(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<RedisLease | number> {
    // Held, tried or awaited here: busy for sure, no round trip needed.
    if (keys.length === 1 && this.lines.get(keys[0])?.occupied()) return ttl;
    const taker = this.taker(ttl, acks);
    const outcome = await this.protocol.attempt(keys, taker.token, ttl, 0, taker.startedAt, acks);
    return outcome.kind === 'ok' ? this.hold(keys, taker, outcome) : outcome.pttl;
  }

  /**
   * One try at each key, in order, in a single round trip (see `canTakeAny`): the first free
   * one is taken. Keys held or awaited in this process are skipped without asking Redis.
   * @returns the lease and the index of its key in `keys`, or the shortest lease left
   */
  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<{ lease: RedisLease; index: number } | number> {
    const candidates: number[] = [];
    keys.forEach((key, i) => {
      if (!this.lines.get(key)?.occupied()) candidates.push(i);
    });
    if (candidates.length === 0) return ttl;
    const taker = this.taker(ttl, acks);
    const r = await this.protocol.takeAny(
      candidates.map((i) => keys[i]),
      taker.token,
      ttl,
      acks,
    );
    if (typeof r === 'number') return r;
    const index = candidates[r.index];
    return { lease: this.hold([keys[index]], taker, r.taken), index };
  }

  /**
   * Renews the lease to `ttl` ms from now. A lease found lost ends here: it holds nothing up in
   * this process any more.
   * @returns false when the lock is no longer held by this lease
   * @throws LockBackendError when too many nodes fail to tell
   */
  async extend(lease: RedisLease, ttl: number, batched = false): Promise<boolean> {
    const start = performance.now();
    const ok = await this.protocol.extend(
      lease.keys,
      lease.token,
      ttl,
      lease.acks,
      shareArg(lease.share),
      true,
      batched && this.policies.renewalBatching,
    );
    if (ok) lease.renewed(start, ttl, this.leases.drift(ttl));
    else this.leaseEnded(lease);
    return ok;
  }

  /**
   * The lease is known to be over (lost, or run out with no renewal): callers of this process
   * waiting for its key stop waiting for its release.
   */
  leaseEnded(lease: RedisLease): void {
    lease.end();
    if (lease.keys.length === 1) this.lines.get(lease.keys[0])?.holdEnded();
    // Found by a refill or a caller's own renewal: the holder's watchdog reports it now.
    lease.watcher?.leaseEnded();
  }

  /**
   * Releases the lease, or hands it straight to the next waiter of this process for the same
   * key (at most `localHandoffs` times in a row, then it goes back to every process).
   * @throws LockBackendError when no majority of nodes could be told (the lease then expires by
   *   itself)
   */
  release(lease: RedisLease): Promise<void> {
    return promiseFrom((done) => this.releaseThen(lease, done));
  }

  /**
   * `release` answered by callback (`error` undefined: done): a lease nobody of this process
   * waits for is given back with no promise made.
   */
  releaseThen(lease: RedisLease, done: (error?: unknown) => void): void {
    if (lease.released) return done();
    lease.released = true;
    if (lease.share === undefined) {
      const line = lease.keys.length === 1 ? this.lines.get(lease.keys[0]) : undefined;
      if (!line?.head || this.closed || !this.policies.localHandoff) {
        return this.giveBackThen(lease, done, line);
      }
      return settleTo(this.handoffs.passOn(lease, line, line.head), done);
    }
    settleTo(this.shared.release(lease), done);
  }

  /**
   * Releases by expiry (`minHold`): the keys stay locked `ms` more in Redis, then expire. The
   * key is not handed to a waiter of this process: this process forgets the hold, so its
   * waiters try over the network and wait for the expiry like those of any other process.
   * @throws LockBackendError when no majority of nodes could be told (the lease then expires by
   *   itself)
   */
  releaseByExpiry(lease: RedisLease, ms: number): Promise<void> {
    if (lease.released) return Promise.resolve();
    lease.released = true;
    if (lease.share !== undefined) return this.shared.releaseByExpiry(lease, ms);
    this.tokens.drop(lease.token);
    return this.protocol
      .letExpire(lease.keys, lease.token, ms)
      .finally(() => this.lines.holdReturned(lease, () => true));
  }

  /** Whether a majority of nodes has the key locked right now. */
  isLocked(key: string): Promise<boolean> {
    return this.protocol.isLocked(key);
  }

  /**
   * The callers of this process waiting in key lines (single-key exclusive waits), at most
   * `limit`, each line's oldest first: the lock board counts those behind a line's head, which
   * Redis does not see (a process queues one caller per key there).
   */
  waitingNow(limit: number): LocalWait[] {
    // performance.now() -> epoch ms.
    const offset = Date.now() - performance.now();
    const out: LocalWait[] = [];
    for (const [key, w] of this.lines.waiting()) {
      if (out.length >= limit) break;
      out.push({
        key,
        since: Math.round(w.startedAt + offset),
        deadline: Math.round(w.deadline + offset),
        ...(w.enqueued && { queued: true }),
      });
    }
    return out;
  }

  /** Ends every wait in progress (they reject with LockBackendError) and stops listening. */
  abortWaits(): void {
    this.closed = true;
    this.closing.abort();
    // Waiters in key lines have no listener on `closing` (thousands wait at once): told here.
    for (const waiter of this.lines.waiters()) waiter.abort();
  }

  /**
   * A lease of `ttl` ms is in use in this group (a `@Locked` method declares it): on a quorum a
   * restarted node waits at least this long before it votes for a new lock.
   */
  leaseInUse(ttl: number): void {
    this.protocol.leaseInUse(ttl);
  }

  /** Resolves once the nodes connected so far are known (startup: see `NodeRestarts`). */
  nodesConfirmed(): Promise<void> {
    return this.protocol.nodesConfirmed();
  }

  async close(): Promise<void> {
    this.settings.connections?.closing();
    this.abortWaits();
    this.protocol.close();
    this.runner.close();
    await this.notifier.close();
    await this.settings.connections?.close();
  }

  // ---------------------------------------------------------------- holding and giving back

  /**
   * The lease a round took; a single key's line counts it as held. `known`: that line, when the
   * caller has it (a first try keeps its line alive while in flight), so it is not looked up again.
   */
  private hold(
    keys: readonly string[],
    taker: RedisTaker,
    taken: Taken,
    known?: KeyLine<Waiter>,
  ): RedisLease {
    const lease = this.leases.taken(keys, taker, taken);
    if (keys.length === 1) {
      const line = known ?? this.lines.of(keys[0]);
      line.hold(lease);
      // Taken after waiting (a grant, an attempt that queued): others may be queued behind,
      // and the callers of this process waiting now each get a turn before they go first.
      if (this.fair && !lease.uncontended) {
        line.othersWait();
        line.turnBegins(taker.token, this.handoffs.turnPasses);
      }
    }
    // Only a token that queued in Redis can be granted a key: a first try's needs no entry.
    if (!lease.uncontended) this.tokens.hold(taker.token);
    return lease;
  }

  /**
   * Gives the key back in Redis (compare-and-delete), then wakes our head if it must try. The
   * key goes public: its line's run of local handoffs ends here, whichever path gave it back
   * (nobody of this process waiting, the bound reached, a waiter that left during a handoff).
   */
  private giveBackThen(
    lease: RedisLease,
    done: (error?: unknown) => void,
    // The key's line when the caller has just looked it up (a release): not looked up twice.
    line = lease.keys.length === 1 ? this.lines.get(lease.keys[0]) : undefined,
  ): void {
    this.tokens.drop(lease.token);
    line?.wentPublic();
    this.protocol.releaseThen(lease.keys, lease.token, (error, published) => {
      // A head that listens hears the PUBLISH at the same moment as the other processes' heads
      // and competes on equal terms; one that does not is told directly.
      this.lines.holdReturned(
        lease,
        (line) => error !== undefined || !published || !line.hearsReleases,
      );
      done(error);
    });
  }

  /** A new acquisition's token, lease length and start. */
  private taker(ttl: number, acks: ReplicaAcks | undefined): RedisTaker {
    return { token: this.tokens.next(), ttl, startedAt: performance.now(), acks };
  }

  /** This engine's parts and own steps, that its parts are wired from (see `EngineCore`). */
  private core(): EngineCore {
    return {
      protocol: this.protocol,
      leases: this.leases,
      tokens: this.tokens,
      notifier: this.notifier,
      stats: this.stats,
      fair: this.fair,
      localHandoffs: this.settings.localHandoffs,
      policies: this.policies,
      lines: this.lines,
      closing: this.closing.signal,
      wakeUps: this.wakeUps,
      grants: this.grants,
      closed: () => this.closed,
      hold: (keys, taker, taken) => this.hold(keys, taker, taken),
      taker: (ttl, acks) => this.taker(ttl, acks),
      leaseEnded: (lease) => this.leaseEnded(lease),
      holdReturned: (lease, wakeHead) => this.lines.holdReturned(lease, wakeHead),
      giveBack: (lease) => promiseFrom((done) => this.giveBackThen(lease, done)),
      release: (lease) => this.release(lease),
    };
  }
}
