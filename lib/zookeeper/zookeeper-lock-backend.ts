import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type * as Zk from 'node-zookeeper-client';
import { LockBackendError, LockConfigError, LockNotAcquiredError } from '../errors';
import { Lease, Leases } from '../engine/lease';
import { LocallyCountedBackend } from '../engine/local-locks';
import {
  type AcquireRequest,
  type BackendHealth,
  type LockBackend,
  type LockClientStats,
  noStats,
  type Share,
} from '../engine/lock-backend';
import { abortReason } from '../engine/wait-rules';
import { MODE_MISMATCH, PERMITS_MISMATCH } from '../engine/engine.messages';
import { ZK_NODE_GONE } from './zookeeper.messages';
import {
  admission,
  keyNodeName,
  kindShare,
  type LockNode,
  lockLine,
  nodePrefix,
} from './lock-nodes';
import { NodeCleanup } from './node-cleanup';
import { checkMembers } from './zookeeper-health';
import {
  NotConnectedError,
  type ZooKeeperDriver,
  ZooKeeperSession,
  zkCode,
  ZK,
} from './zookeeper-session';

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

/** One key held: its node (full path) and the key's parent. */
interface HeldNode {
  readonly key: string;
  readonly path: string;
  readonly fence: number;
}

/** A hold of this process: its lease, its nodes, and the timer that ends it at its `ttl`. */
interface Hold {
  readonly lease: Lease;
  readonly nodes: readonly HeldNode[];
  timer?: NodeJS.Timeout;
}

/** A wait in progress, ended early by an expired session or `abortWaits`. */
interface Wait {
  readonly keys: readonly string[];
  end(reason: unknown): void;
}

/** Ops on a parent that races a cleanup (NO_NODE) are retried this many times. */
const PARENT_RACES = 5;
const EMPTY = Buffer.alloc(0);
/** The system a LockBackendError names. */
const SYSTEM = 'ZooKeeper';

/**
 * The lock engine of one group on ZooKeeper (`nest-locked/zookeeper`): the `LockBackend`
 * contract over the ZooKeeper lock recipe, one session per group.
 *
 * - A hold is an ephemeral sequential node under the key's parent; the line is the children in
 *   sequence order. A waiter watches only the node(s) whose leaving can let it in (see
 *   `admission`): no polling, and a release wakes only who it lets in.
 * - The node is created in a multi with a `setData` on the parent (one round trip): the
 *   parent's stat tells how many children it has (1: the key was free, no listing needed) and its
 *   mzxid is the multi's zxid, which is the node's czxid: the fence. zxids are global and
 *   strictly increasing, the line is in creation order, and a parent deleted and created again
 *   gets children created later still: fences strictly increase per key.
 * - The session is the lease: it expires when the process stops answering (killed, frozen,
 *   partitioned) and every node of it goes. Locally a lease lasts `ttl` (or the session timeout,
 *   if shorter) from its last confirmation; `extend` confirms the nodes are there. A session
 *   found expired ends every lease at once (`lease.watcher`).
 * - Empty parents are deleted `parentCleanupDelay` after their last local use, and at start
 *   those dead processes left (see NodeCleanup).
 * @internal
 */
export class ZooKeeperLockBackend extends LocallyCountedBackend<Wait> implements LockBackend {
  readonly stats: LockClientStats = noStats();
  readonly notifier = { size: 0 } as const;
  readonly canTakeAny = true;
  private readonly session: ZooKeeperSession;
  private readonly cleanup: NodeCleanup;
  private readonly leases: Leases;
  private readonly held = new Set<Hold>();
  private readonly byLease = new Map<Lease, Hold>();
  /**
   * Exclusive waiters of this process by the path of the held node just ahead of theirs: when
   * that hold ends here, the waiter is first in line, so it is told at once (no watch event, no
   * look at the line; the delete goes out behind it, and this session's requests keep order).
   */
  private readonly successors = new Map<string, () => void>();
  private readonly instance = randomBytes(4).toString('hex');
  private tokens = 0;
  private closed = false;

  constructor(
    private readonly zk: ZooKeeperDriver,
    private readonly settings: ZooKeeperSettings,
  ) {
    super();
    this.leases = new Leases(settings.driftFactor);
    this.session = new ZooKeeperSession(
      zk,
      settings.connectString,
      settings.sessionTimeout,
      settings.commandTimeout,
      { sessionEnded: (cause) => this.sessionEnded(cause) },
    );
    this.cleanup = new NodeCleanup(this.session, {
      root: settings.root,
      parentCleanupDelay: settings.parentCleanupDelay,
      sessionTimeout: settings.sessionTimeout,
      parentOf: (key) => this.parentOf(key),
      inUse: (key) => this.local.holds(key) || this.local.queued(key) > 0,
    });
  }

  get name(): string {
    return this.settings.name;
  }

  async start(): Promise<void> {
    await this.session.ready(this.settings.connectTimeout);
    await this.call([], 'start', (c, done) => c.mkdirp(this.settings.root, (e) => done(e)));
    void this.cleanup.sweepParents();
  }

  async health(timeout: number): Promise<BackendHealth> {
    return checkMembers(this.session, timeout);
  }

  async acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    const { ttl, waitTimeout, signal, share } = request;
    const startedAt = performance.now();
    if (this.closed) throw abortReason(keys);
    if (signal?.aborted) throw signal.reason;
    this.stats.attempts++;
    const deadline = startedAt + Math.max(0, waitTimeout);
    const token = this.nextToken();
    const taken: HeldNode[] = [];
    let uncontended = true;
    const wait: Wait = { keys, end: () => undefined };
    this.local.waitStarted(wait);
    try {
      for (const key of keys) {
        const entered = await this.enter(key, token, share, keys);
        taken.push(entered.node);
        if (entered.admitted) continue;
        uncontended = false;
        if (
          waitTimeout <= 0 ||
          !(await this.waitTurn(entered.node, share, keys, deadline, signal, wait))
        ) {
          throw new LockNotAcquiredError(keys, performance.now() - startedAt, ttl);
        }
        this.stats.grants++;
      }
    } catch (error) {
      this.leave(taken);
      throw error;
    } finally {
      this.local.waitEnded(wait);
    }
    return this.hold(keys, token, taken, ttl, share, startedAt, uncontended);
  }

  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    const startedAt = performance.now();
    this.stats.attempts++;
    const token = this.nextToken();
    const taken: HeldNode[] = [];
    try {
      for (const key of keys) {
        const entered = await this.enter(key, token, undefined, keys);
        taken.push(entered.node);
        if (!entered.admitted) {
          this.leave(taken);
          return ttl;
        }
      }
    } catch (error) {
      this.leave(taken);
      throw error;
    }
    return this.hold(keys, token, taken, ttl, undefined, startedAt, true);
  }

  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
  ): Promise<{ lease: Lease; index: number } | number> {
    const startedAt = performance.now();
    this.stats.attempts++;
    for (let index = 0; index < keys.length; index++) {
      const token = this.nextToken();
      const entered = await this.enter(keys[index], token, undefined, [keys[index]]);
      if (entered.admitted) {
        const lease = this.hold(
          [keys[index]],
          token,
          [entered.node],
          ttl,
          undefined,
          startedAt,
          true,
        );
        return { lease, index };
      }
      this.leave([entered.node]);
    }
    return ttl;
  }

  async extend(lease: Lease, ttl: number): Promise<boolean> {
    const hold = this.byLease.get(lease);
    if (!hold || !lease.validAt(performance.now())) return false;
    const start = performance.now();
    const stats = await Promise.all(
      hold.nodes.map((n) =>
        this.call(lease.keys, 'extend', (c, done: (e: unknown, s?: Zk.Stat) => void) =>
          c.exists(n.path, (e, s) => done(e, s)),
        ),
      ),
    );
    if (this.byLease.get(lease) !== hold) return false;
    if (stats.some((s) => !s)) {
      this.drop(hold);
      lease.end();
      return false;
    }
    lease.renewed(start, Math.min(ttl, this.session.timeout), this.leases.drift(ttl));
    this.arm(hold, ttl);
    return true;
  }

  leaseEnded(lease: Lease): void {
    lease.end();
    const hold = this.byLease.get(lease);
    // Over for its holder: the key is freed for the others, as an expired Redis key would be.
    if (hold) this.drop(hold);
  }

  async release(lease: Lease): Promise<void> {
    if (lease.released) return;
    lease.released = true;
    const hold = this.byLease.get(lease);
    if (!hold) return;
    this.forget(hold);
    this.handOff(hold.nodes);
    await this.deleteNodes(lease.keys, hold.nodes, 'release');
  }

  async releaseByExpiry(lease: Lease, ms: number): Promise<void> {
    if (lease.released) return;
    lease.released = true;
    const hold = this.byLease.get(lease);
    if (!hold) return;
    // This process forgets the hold now; the nodes stay until `ms` from now (or the session ends).
    this.forget(hold);
    const timer = setTimeout(() => {
      this.handOff(hold.nodes);
      this.leave(hold.nodes);
    }, ms);
    timer.unref();
  }

  async isLocked(key: string): Promise<boolean> {
    const children = await this.children(key, [key], 'check');
    return lockLine(children).length > 0;
  }

  abortWaits(): void {
    this.closed = true;
    for (const w of [...this.local.waits]) w.end(abortReason(w.keys));
  }

  async close(): Promise<void> {
    this.abortWaits();
    for (const hold of [...this.held]) this.forget(hold);
    this.cleanup.close();
    // Closing the session deletes its ephemeral nodes at once; empty parents stay behind.
    this.session.close();
  }

  // ---------------------------------------------------------------- the recipe

  private nextToken(): string {
    return `${this.instance}.${(++this.tokens).toString(36)}`;
  }

  private parentOf(key: string): string {
    return `${this.settings.root}/${keyNodeName(this.settings.keyPrefix + key)}`;
  }

  /**
   * Creates this caller's node in the key's line: the node and a touch of the parent in one
   * multi. Admitted at once when it is the parent's only child (the common uncontended case: one
   * round trip), else after a look at the line.
   */
  private async enter(
    key: string,
    token: string,
    share: Share | undefined,
    keys: readonly string[],
  ): Promise<{ node: HeldNode; admitted: boolean }> {
    this.cleanup.keyUsed(key);
    const parent = this.parentOf(key);
    const name = nodePrefix(share, token);
    for (let race = 0; ; race++) {
      try {
        const results = await this.session.run(
          (c, done: (e: unknown, r?: { path?: string; stat?: Zk.Stat }[]) => void) =>
            c
              .transaction()
              .create(`${parent}/${name}`, EMPTY, this.zk.CreateMode.EPHEMERAL_SEQUENTIAL)
              .setData(parent, EMPTY, -1)
              .commit((e, r) => done(e, r as { path?: string; stat?: Zk.Stat }[])),
          false,
        );
        const stat = results[1].stat!;
        const node: HeldNode = { key, path: results[0].path!, fence: zxid(stat.mzxid) };
        if (stat.numChildren === 1) return { node, admitted: true };
        return await this.placed(node, share, keys);
      } catch (error) {
        if (error instanceof LockConfigError || error instanceof LockBackendError) throw error;
        const code = zkCode(error);
        if (code === ZK.NO_NODE && race < PARENT_RACES) {
          await this.call(keys, 'acquire', (c, done) => c.mkdirp(parent, (e) => done(e)));
          continue;
        }
        if (code === ZK.CONNECTION_LOSS && race < PARENT_RACES) {
          // The connection broke under the create (a member gone): it may or may not have
          // happened. The token in the name finds it (Curator's protected mode); else again.
          const found = await this.findOwn(key, name, keys).catch((e: unknown) => {
            this.cleanup.findLater(parent, name);
            throw e;
          });
          if (!found) continue;
          return await this.placed(found, share, keys);
        }
        // Sent but no answer: a node made meanwhile is found and deleted once connected.
        const sent = !(error instanceof NotConnectedError);
        if (sent && (code === undefined || code === ZK.CONNECTION_LOSS)) {
          this.cleanup.findLater(parent, name);
        }
        throw this.backendError(keys, 'acquire', error);
      }
    }
  }

  /** A node in line whose place is not known yet: admitted or not; deleted if that fails. */
  private async placed(
    node: HeldNode,
    share: Share | undefined,
    keys: readonly string[],
  ): Promise<{ node: HeldNode; admitted: boolean }> {
    try {
      return { node, admitted: (await this.look(node, share, keys)).admitted };
    } catch (error) {
      this.leave([node]);
      throw error;
    }
  }

  /** This caller's node for `key` (its name starts with `name`), if a create made it. */
  private async findOwn(
    key: string,
    name: string,
    keys: readonly string[],
  ): Promise<HeldNode | undefined> {
    const own = (await this.children(key, keys, 'acquire')).find((c) => c.startsWith(name));
    if (!own) return undefined;
    const path = `${this.parentOf(key)}/${own}`;
    const stat = await this.call(keys, 'acquire', (c, done: (e: unknown, s?: Zk.Stat) => void) =>
      c.exists(path, (e, s) => done(e, s)),
    );
    return stat ? { key, path, fence: zxid(stat.czxid) } : undefined;
  }

  /**
   * Where `node` stands in its line now. A shared hold of another kind ahead is a
   * LockConfigError (its node is deleted first).
   */
  private async look(
    node: HeldNode,
    share: Share | undefined,
    keys: readonly string[],
  ): Promise<{ admitted: boolean; watch: readonly LockNode[] }> {
    let line = lockLine(await this.children(node.key, keys, 'acquire'));
    const own = node.path.slice(node.path.lastIndexOf('/') + 1);
    if (!line.some((n) => n.name === own)) {
      throw this.backendError(keys, 'acquire', new Error(ZK_NODE_GONE(node.key)));
    }
    // Another node of this very call: a create whose answer was lost and that a member behind
    // did not show yet when it was looked for. It would block us: it goes.
    const twins = line.filter((n) => n.name !== own && sameCall(n.name, own));
    if (twins.length > 0) {
      const parent = this.parentOf(node.key);
      this.leave(twins.map((t) => ({ key: node.key, path: `${parent}/${t.name}`, fence: 0 })));
      line = line.filter((n) => !twins.includes(n));
    }
    const verdict = admission(line, own, share);
    if ('mismatch' in verdict) {
      this.leave([node]);
      throw mismatch(node.key, share!, verdict.mismatch);
    }
    return verdict.admitted
      ? { admitted: true, watch: [] }
      : { admitted: false, watch: verdict.watch };
  }

  /**
   * Waits until `node` is admitted: watches the nodes ahead whose leaving can let it in, looks
   * again when one goes. False at the deadline; rejects on abort or a lost session.
   */
  private async waitTurn(
    node: HeldNode,
    share: Share | undefined,
    keys: readonly string[],
    deadline: number,
    signal: AbortSignal | undefined,
    wait: Wait,
  ): Promise<boolean> {
    for (;;) {
      const verdict = await this.look(node, share, keys);
      if (verdict.admitted) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      const parent = this.parentOf(node.key);
      // Exclusive, behind one node: if that is a hold of this process, its end admits us.
      const successorOf =
        share === undefined && verdict.watch.length === 1
          ? `${parent}/${verdict.watch[0].name}`
          : undefined;
      const outcome = await new Promise<'moved' | 'deadline' | 'admitted'>((resolve, reject) => {
        let settled = false;
        const admit = () => finish('admitted');
        const finish = (outcome?: 'moved' | 'deadline' | 'admitted', reason?: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (successorOf && this.successors.get(successorOf) === admit) {
            this.successors.delete(successorOf);
          }
          signal?.removeEventListener('abort', onAbort);
          wait.end = () => undefined;
          if (outcome) resolve(outcome);
          else reject(reason);
        };
        const onAbort = () => finish(undefined, signal!.reason);
        const timer = setTimeout(() => finish('deadline'), left);
        signal?.addEventListener('abort', onAbort);
        wait.end = (reason) => finish(undefined, reason);
        // Aborted (or the app closing) while it was still looking at the line: the listener and
        // `wait.end` came too late to hear it.
        if (signal?.aborted) return onAbort();
        if (this.closed) return finish(undefined, abortReason(keys));
        if (successorOf) this.successors.set(successorOf, admit);
        for (const ahead of verdict.watch) {
          const path = `${parent}/${ahead.name}`;
          // A data watch (Curator's choice): it fires once, when the node is deleted, and a
          // node already gone answers NO_NODE and leaves no watch behind (an exists watch would
          // stay on the server and in the driver until the session ends).
          this.session
            .run((c, done) =>
              c.getData(
                path,
                () => finish('moved'),
                (e) => done(e),
              ),
            )
            .then(
              () => undefined,
              (error) =>
                zkCode(error) === ZK.NO_NODE
                  ? finish('moved')
                  : finish(undefined, this.backendError(keys, 'acquire', error)),
            );
        }
      });
      if (outcome === 'deadline') return false;
      if (outcome === 'admitted') return true;
    }
  }

  /** The key's holder now, with a lease of this process. */
  private hold(
    keys: readonly string[],
    token: string,
    nodes: HeldNode[],
    ttl: number,
    share: Share | undefined,
    startedAt: number,
    uncontended: boolean,
  ): Lease {
    const now = performance.now();
    // Ours for ttl from now, and at most a session timeout past the last answered call.
    const until = Math.min(now + ttl, this.session.confirmedAt + this.session.timeout);
    const lease = new Lease(
      keys,
      token,
      nodes.map((n) => n.fence),
      0,
      ttl,
      uncontended,
      until - this.leases.drift(ttl),
      Date.now(),
      now - startedAt,
    );
    lease.share = share;
    const hold: Hold = { lease, nodes };
    this.held.add(hold);
    this.byLease.set(lease, hold);
    this.local.held(keys);
    this.arm(hold, ttl);
    return lease;
  }

  /** Frees the keys `ttl` from now unless renewed: a forgotten hold never blocks them longer. */
  private arm(hold: Hold, ttl: number): void {
    clearTimeout(hold.timer);
    hold.timer = setTimeout(() => {
      hold.lease.end();
      hold.lease.watcher?.leaseEnded();
      this.drop(hold);
    }, ttl);
    hold.timer.unref();
  }

  /** The hold is over: forgotten here, its nodes deleted. */
  private drop(hold: Hold): void {
    if (!this.held.has(hold)) return;
    this.forget(hold);
    this.handOff(hold.nodes);
    this.leave(hold.nodes);
  }

  private forget(hold: Hold): void {
    if (!this.held.delete(hold)) return;
    clearTimeout(hold.timer);
    this.byLease.delete(hold.lease);
    this.local.released(hold.lease.keys);
  }

  /** The holds of these nodes end: the waiter of this process right behind each goes in. */
  private handOff(nodes: readonly HeldNode[]): void {
    for (const node of nodes) {
      const next = this.successors.get(node.path);
      if (!next) continue;
      this.successors.delete(node.path);
      this.stats.localHandoffs++;
      next();
    }
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

  private async children(
    key: string,
    keys: readonly string[],
    operation: string,
  ): Promise<string[]> {
    try {
      return await this.session.run((c, done: (e: unknown, r?: string[]) => void) =>
        c.getChildren(this.parentOf(key), (e, r) => done(e, r)),
      );
    } catch (error) {
      if (zkCode(error) === ZK.NO_NODE) return [];
      throw this.backendError(keys, operation, error);
    }
  }

  /** One driver call; any failure is a LockBackendError for `keys`. */
  private async call<T>(
    keys: readonly string[],
    operation: string,
    run: (client: Zk.Client, done: (error: unknown, value?: T) => void) => void,
  ): Promise<T> {
    try {
      return await this.session.run(run);
    } catch (error) {
      throw this.backendError(keys, operation, error);
    }
  }

  private backendError(keys: readonly string[], operation: string, error: unknown): Error {
    if (error instanceof LockBackendError || error instanceof LockConfigError) return error;
    const cause = error instanceof Error ? error : new Error(String(error));
    return new LockBackendError(keys, [cause], operation, SYSTEM);
  }

  /** Every node of the old session is gone: every hold is over, every wait has lost its place. */
  private sessionEnded(cause: Error): void {
    for (const hold of [...this.held]) {
      this.forget(hold);
      hold.lease.end();
      hold.lease.watcher?.leaseEnded();
    }
    for (const w of [...this.local.waits])
      w.end(new LockBackendError(w.keys, [cause], 'acquire', SYSTEM));
    this.cleanup.sessionEnded();
  }
}

/** Whether two node names are of one call (same kind and token: all but the sequence). */
function sameCall(a: string, b: string): boolean {
  return a.length === b.length && a.slice(0, -10) === b.slice(0, -10);
}

/** `Promise.allSettled` of one promise, without the array. */
function settled<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}

/** A zxid (8 bytes, big-endian) as a number: exact below 2^53 (epochs below 2^21). */
function zxid(bytes: Buffer): number {
  return Number(bytes.readBigInt64BE(0));
}

function mismatch(key: string, share: Share, ahead: LockNode): LockConfigError {
  const held = kindShare(ahead.kind);
  if (typeof share === 'number' && typeof held === 'number') {
    return new LockConfigError(PERMITS_MISMATCH(key, share, held), 'permits');
  }
  const asked = share === 'read' ? 'read' : `permits: ${share}`;
  const holders = held === 'read' ? 'read' : `permits: ${held}`;
  return new LockConfigError(
    MODE_MISMATCH(key, asked, holders),
    share === 'read' ? 'mode' : 'permits',
  );
}
