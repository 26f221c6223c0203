import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type * as Zk from 'node-zookeeper-client';
import type { BoardSource } from '../core/board-source';
import { ZooKeeperBoardSource } from './zookeeper-board-source';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import { heldLease } from '../core/held-lease';
import type { Lease } from '../core/lease';
import { type AcquireRequest, type BackendHealth, type Share } from '../core/lock-backend';
import { SessionBackend } from '../core/session-backend';
import type { SessionHold } from '../core/session-hold';
import { outageRetryDelay } from '../core/wait-rules';
import { keyNodeName, lockLine } from './lock-nodes';
import { NodeCleanup } from './node-cleanup';
import { TurnWaits, type Wait } from './turn-waits';
import { type HeldNode, ZnodeLines } from './znode-lines';
import { callFor, SYSTEM } from './zookeeper-errors';
import { checkMembers } from './zookeeper-health';
import { type ZooKeeperDriver, ZooKeeperSession, zkCode, ZK } from './zookeeper-session';
import { ZK_NODE_GONE, ZK_SESSION_UNCONFIRMED } from './zookeeper.messages';

/** Beyond start's own bounds, before the module stops waiting for it (timers run late). */
const START_MARGIN_MS = 1_000;

/** What the backend needs to know, resolved from the user's options and the module's. @internal */
export interface ZooKeeperSettings {
  readonly name: string;
  readonly connectString: string;
  /** Persistent node under which every key's parent lives. */
  readonly root: string;
  /** Prepended to every key's node name (the module's `keyPrefix`). */
  readonly keyPrefix: string;
  readonly sessionTimeout: number;
  readonly connectTimeout: number;
  readonly commandTimeout: number;
  readonly parentCleanupDelay: number;
  readonly driftFactor: number;
}

/** A hold of this process: its lease and its nodes; it ends at its `ttl` unless renewed. */
interface Hold extends SessionHold {
  readonly nodes: readonly HeldNode[];
}

/**
 * The lock engine of one group on ZooKeeper (`nest-locked/zookeeper`): the `LockBackend`
 * contract over the ZooKeeper lock recipe, one session per group.
 *
 * - A hold is an ephemeral sequential node under the key's parent; the line is the children in
 *   sequence order (ZnodeLines). A waiter watches only the node(s) whose leaving can let it in
 *   (TurnWaits): no polling, and a release wakes only who it lets in.
 * - The node is created in a multi with a `setData` on the parent (one round trip): the
 *   parent's stat tells how many children it has (1: the key was free, no listing needed) and its
 *   mzxid is the multi's zxid, which is the node's czxid: the fence. zxids are global and
 *   strictly increasing, the line is in creation order, and a parent deleted and created again
 *   gets children created later still: fences strictly increase per key.
 * - The session is the lease: it expires when the process stops answering (killed, frozen,
 *   partitioned) and every node of it goes. Locally a hold is valid until the earlier of its own
 *   end (`ttl` from its acquire or last `extend`, which confirms the nodes are there) and the
 *   session's (a session timeout past the last call the ensemble answered, moved forward by
 *   every answer of the liveness probe), each less its drift allowance. A session found expired
 *   ends every lease at once (`lease.watcher`).
 * - A waiter rides through a blip: when ZooKeeper fails its entry or its session expires, it
 *   backs off and enters its lines again (at their end, under the new session) until its
 *   deadline; holds are never carried over.
 * - Empty parents are deleted `parentCleanupDelay` after their last local use, and at start
 *   those dead processes left (see NodeCleanup).
 * @internal
 */
export class ZooKeeperLockBackend extends SessionBackend<Hold, Wait> {
  private readonly session: ZooKeeperSession;
  private readonly cleanup: NodeCleanup;
  private readonly lines: ZnodeLines;
  private readonly turns: TurnWaits;

  constructor(
    private readonly zk: ZooKeeperDriver,
    private readonly settings: ZooKeeperSettings,
  ) {
    // Tokens name nodes beside other processes' (`lock-nodes.ts`): this process's random id.
    super({
      driftFactor: settings.driftFactor,
      tokenPrefix: randomBytes(4).toString('hex'),
      system: SYSTEM,
    });
    const parentOf = (key: string) => this.parentOf(key);
    this.session = new ZooKeeperSession(
      zk,
      settings.connectString,
      settings.sessionTimeout,
      settings.commandTimeout,
      {
        sessionEnded: (cause) => this.sessionEnded(cause),
        sessionConfirmed: () => this.sessionConfirmed(),
      },
    );
    this.cleanup = new NodeCleanup(this.session, {
      root: settings.root,
      parentCleanupDelay: settings.parentCleanupDelay,
      sessionTimeout: settings.sessionTimeout,
      parentOf,
      inUse: (key) => this.local.inUse(key),
    });
    this.lines = new ZnodeLines({
      zk,
      session: this.session,
      cleanup: this.cleanup,
      parentOf,
      leave: (nodes) => this.leave(nodes),
    });
    this.turns = new TurnWaits({
      session: this.session,
      lines: this.lines,
      stats: this.stats,
      parentOf,
      isClosed: () => this.closed,
    });
  }

  get name(): string {
    return this.settings.name;
  }

  /** The lock board's reads and force release on this group (`nest-locked/board` only). */
  boardSource(): BoardSource {
    const { name: group, root, keyPrefix } = this.settings;
    return new ZooKeeperBoardSource({
      zk: this.zk,
      session: this.session,
      group,
      root,
      keyPrefix,
      instance: this.tokenPrefix,
      parentOf: (key) => this.parentOf(key),
    });
  }

  /**
   * `start` waits `connectTimeout` for a connection (its error names the ensemble), then makes
   * the root within `commandTimeout`; a little more so the module's own bound never wins.
   */
  get startTimeout(): number {
    return this.settings.connectTimeout + this.settings.commandTimeout + START_MARGIN_MS;
  }

  async start(): Promise<void> {
    await this.session.ready(this.settings.connectTimeout);
    await callFor(this.session, [], 'start', (c, done) =>
      c.mkdirp(this.settings.root, (e) => done(e)),
    );
    void this.cleanup.sweepParents();
  }

  async health(timeout: number): Promise<BackendHealth> {
    return checkMembers(this.session, timeout);
  }

  /**
   * Enters the lines of `keys` and waits its turn, entering again after a failure of ZooKeeper or
   * an expired session while the wait lasts (backing off as the other backends do, see
   * `wait-rules`): its nodes of the old session are gone or deleted, and the new ones are at the
   * end of the lines. At the deadline one last look at the line decides between busy and an
   * outage (see `TurnWaits.waitTurn`).
   */
  async acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    const { waitTimeout, signal } = request;
    const startedAt = performance.now();
    this.opening(keys, signal);
    this.stats.attempts++;
    const deadline = startedAt + Math.max(0, waitTimeout);
    const wait: Wait = { keys, abort: () => undefined };
    this.local.waitStarted(wait);
    try {
      for (let failures = 1; ; failures++) {
        try {
          return await this.enter(keys, request, startedAt, deadline, wait);
        } catch (error) {
          const again = error instanceof LockBackendError && performance.now() < deadline;
          if (!again || this.closed || signal?.aborted) throw error;
          await this.backOff(outageRetryDelay(failures, deadline), signal, wait);
          this.opening(keys, signal);
          if (performance.now() >= deadline) throw error;
        }
      }
    } finally {
      this.local.waitEnded(wait);
    }
  }

  /** One entry into the lines of `keys`, and the wait for its turn until `deadline`. */
  private async enter(
    keys: readonly string[],
    request: AcquireRequest,
    startedAt: number,
    deadline: number,
    wait: Wait,
  ): Promise<Lease> {
    const { ttl, waitTimeout, signal, share } = request;
    const token = this.nextToken();
    const taken: HeldNode[] = [];
    try {
      for (const key of keys) {
        const entered = await this.lines.enter(key, token, share, keys);
        taken.push(entered.node);
        if (entered.admitted) continue;
        if (
          waitTimeout <= 0 ||
          !(await this.turns.waitTurn(entered.node, share, keys, deadline, signal, wait))
        ) {
          const waited = performance.now() - startedAt;
          throw new LockNotAcquiredError(keys, waited, await this.busyAnswer(keys, ttl));
        }
        this.stats.grants++;
      }
    } catch (error) {
      this.leave(taken);
      throw error;
    }
    return this.hold(keys, token, taken, ttl, share, startedAt);
  }

  /**
   * Waits `ms` before a waiter enters its lines again; cut short by its signal, the app closing
   * or a new session (through `wait.abort`).
   */
  private backOff(ms: number, signal: AbortSignal | undefined, wait: Wait): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        wait.abort = () => undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done);
      wait.abort = done;
    });
  }

  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    const startedAt = performance.now();
    this.stats.attempts++;
    const token = this.nextToken();
    const taken: HeldNode[] = [];
    try {
      for (const key of keys) {
        const entered = await this.lines.enter(key, token, undefined, keys);
        taken.push(entered.node);
        if (!entered.admitted) {
          this.leave(taken);
          return await this.busyAnswer(keys, ttl);
        }
      }
    } catch (error) {
      this.leave(taken);
      throw error;
    }
    return this.hold(keys, token, taken, ttl, undefined, startedAt);
  }

  async extend(lease: Lease, ttl: number): Promise<boolean> {
    const hold = this.held.get(lease);
    if (!hold || !lease.validAt(performance.now())) return false;
    const start = performance.now();
    const stats = await Promise.all(
      hold.nodes.map((n) =>
        callFor(this.session, lease.keys, 'extend', (c, done: (e: unknown, s?: Zk.Stat) => void) =>
          c.exists(n.path, (e, s) => done(e, s)),
        ),
      ),
    );
    if (!this.isHeld(hold)) return false;
    if (stats.some((s) => !s)) {
      lease.end();
      this.drop(hold);
      return false;
    }
    hold.expiresAt = start + ttl;
    lease.renewed(start, ttl, this.leases.drift(ttl));
    lease.validUntil = Math.min(lease.validUntil, this.sessionValidUntil());
    this.arm(hold);
    return true;
  }

  leaseEnded(lease: Lease): void {
    lease.end();
    const hold = this.held.get(lease);
    // Over for its holder: the key is freed for the others, as an expired Redis key would be.
    if (hold) this.drop(hold);
  }

  protected async releaseHeld(hold: Hold): Promise<void> {
    this.forget(hold);
    this.handOff(hold);
    await this.deleteNodes(hold.lease.keys, hold.nodes, 'release');
  }

  protected async releaseHeldByExpiry(hold: Hold, ms: number): Promise<void> {
    // This process forgets the hold now; the nodes stay until `ms` from now (or the session ends).
    this.forget(hold);
    const timer = setTimeout(() => {
      this.handOff(hold);
      this.leave(hold.nodes);
    }, ms);
    timer.unref();
  }

  async isLocked(key: string): Promise<boolean> {
    const children = await this.lines.children(key, [key], 'check');
    return lockLine(children).length > 0;
  }

  async close(): Promise<void> {
    this.abortWaits();
    for (const hold of [...this.held.values()]) this.forget(hold);
    this.cleanup.close();
    // Closing the session deletes its ephemeral nodes at once; empty parents stay behind.
    this.session.close();
  }

  // ---------------------------------------------------------------- the recipe

  private parentOf(key: string): string {
    return `${this.settings.root}/${keyNodeName(this.settings.keyPrefix + key)}`;
  }

  /**
   * Resolves if every node is still an ephemeral node of this session and the answer came within
   * the session's validity (a session timeout, less its drift, after it was sent).
   */
  private async confirmNodes(nodes: readonly HeldNode[]): Promise<void> {
    const stats = await Promise.all(
      nodes.map((n) =>
        this.session.run((c, done: (e: unknown, s?: Zk.Stat) => void) =>
          c.exists(n.path, (e, s) => done(e, s)),
        ),
      ),
    );
    const gone = nodes.find((_, i) => !this.session.owns(stats[i]));
    if (gone) throw new Error(ZK_NODE_GONE(gone.key));
    if (performance.now() >= this.sessionValidUntil()) {
      throw new Error(ZK_SESSION_UNCONFIRMED(this.session.timeout));
    }
  }

  /**
   * The key's holder now, with a lease of this process, once the session is certainly alive. An
   * answer that admitted the nodes may be read long after it was sent (the process paused or
   * frozen meanwhile): when the session is no longer confirmed by then, it may have expired
   * since, the nodes with it, and another process may hold the key; the lease would be over
   * before it began. The nodes are looked up first: still this session's (which confirms the
   * session), or the call fails.
   */
  private async hold(
    keys: readonly string[],
    token: string,
    nodes: HeldNode[],
    ttl: number,
    share: Share | undefined,
    startedAt: number,
  ): Promise<Lease> {
    if (performance.now() >= this.sessionValidUntil()) {
      try {
        await this.confirmNodes(nodes);
      } catch (error) {
        this.leave(nodes);
        throw this.backendError(keys, 'acquire', error);
      }
    }
    const now = performance.now();
    // Ours for ttl from now, while the session certainly lives.
    const lease = heldLease({
      keys,
      token,
      fences: nodes.map((n) => n.fence),
      ttl,
      validUntil: Math.min(this.leases.validUntil(now, ttl), this.sessionValidUntil()),
      waitedMs: now - startedAt,
      share,
    });
    // Freed `ttl` from now unless renewed: a forgotten hold never blocks the keys longer.
    this.keep({ lease, nodes, expiresAt: now + ttl });
    return lease;
  }

  protected holdExpired(hold: Hold): void {
    this.drop(hold);
  }

  /**
   * The hold ends: the waiter of this process right behind each of its nodes goes in now, before
   * the delete, if the hold was exclusive and its lease is still valid. Otherwise the waiter
   * hears of the delete from ZooKeeper and looks at the line again:
   * - an exclusive hold is the head of its line, so the waiter behind it is next; a read or
   *   permit hold need not be (another process's reads may still hold the key ahead of it);
   * - a lease that ran out (or was found lost) says nothing of the session: cut off or paused
   *   for a session timeout, both nodes may be gone with an expired session and another process
   *   may hold the key; the waiter would get a lease over before it began. A valid lease means
   *   the session certainly lives (a lease never outlasts the session's last confirmation).
   */
  private handOff(hold: Hold): void {
    if (hold.lease.share !== undefined || !hold.lease.validAt(performance.now())) return;
    this.turns.handOff(hold.nodes);
  }

  /** The hold is over: forgotten here, its nodes deleted. */
  private drop(hold: Hold): void {
    if (!this.forget(hold)) return;
    this.handOff(hold);
    this.leave(hold.nodes);
  }

  /** Deletes nodes in the background (a waiter that gave up, a hold dropped). */
  private leave(nodes: readonly HeldNode[]): void {
    if (nodes.length === 0) return;
    this.deleteNodes(
      nodes.map((n) => n.key),
      nodes,
      'release',
    ).catch(() => undefined);
  }

  private async deleteNodes(
    keys: readonly string[],
    nodes: readonly HeldNode[],
    operation: string,
  ): Promise<void> {
    const results =
      nodes.length === 1
        ? [await settled(this.cleanup.remove(nodes[0].path))]
        : await Promise.allSettled(nodes.map((n) => this.cleanup.remove(n.path)));
    const failures: Error[] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled' || zkCode(r.reason) === ZK.NO_NODE) {
        this.cleanup.keyIdle(nodes[i].key);
        return;
      }
      // Still there while the session lives: deleted again once the connection is back.
      this.cleanup.later(nodes[i].path);
      failures.push(r.reason as Error);
    });
    if (failures.length > 0) throw new LockBackendError(keys, failures, operation, SYSTEM);
  }

  /**
   * Until when the session certainly lives on the ensemble: it heard from the session after
   * `confirmedAt` (a call sent then was answered), and expires a session timeout after it last
   * heard from it, less the drift allowance of that timeout (not of a hold's ttl: a ttl of 100
   * session timeouts would otherwise leave nothing).
   */
  private sessionValidUntil(): number {
    const timeout = this.session.timeout;
    return this.session.confirmedAt + timeout - this.leases.drift(timeout);
  }

  /**
   * The session was confirmed: every hold still valid is valid until its own end or the
   * session's, whichever comes first (as on etcd, where the session's keep-alive moves them). A
   * lease that ran out stays out: its holder may have been told already.
   */
  private sessionConfirmed(): void {
    const now = performance.now();
    const session = this.sessionValidUntil();
    for (const { lease, expiresAt } of this.held.values()) {
      if (!lease.validAt(now)) continue;
      lease.validUntil = Math.min(expiresAt - this.leases.drift(lease.ttl), session);
    }
  }

  /**
   * Every node of the old session is gone: every hold is over, every wait has lost its place (it
   * enters its lines again under the new session while it has time left, see `acquire`).
   */
  private sessionEnded(cause: Error): void {
    for (const hold of [...this.held.values()]) {
      this.forget(hold);
      hold.lease.end();
      hold.lease.watcher?.leaseEnded();
    }
    for (const w of [...this.local.waits]) w.abort(this.backendError(w.keys, 'acquire', cause));
    this.cleanup.sessionEnded();
  }
}

/** `Promise.allSettled` of one promise, without the array. */
function settled<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}
