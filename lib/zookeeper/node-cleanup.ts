import { performance } from 'node:perf_hooks';
import type * as Zk from 'node-zookeeper-client';
import { type ZooKeeperSession, zkCode, ZK } from './zookeeper-session';

/** Parents deleted at once by the sweep at start. */
const SWEEP_BATCH = 16;
/** Looks for the node of a create that got no answer, before giving it up to the session. */
const SWEEP_ATTEMPTS = 3;

/** Where the cleanup works, and what it must not touch. @internal */
export interface CleanupScope {
  readonly root: string;
  readonly parentCleanupDelay: number;
  /** How long to wait for a connection before a retry. */
  readonly sessionTimeout: number;
  parentOf(key: string): string;
  /** A key held or awaited by this process: its parent stays. */
  inUse(key: string): boolean;
}

/**
 * The deletes that are housekeeping, not part of a lock or release (the driver cannot create
 * container nodes, so parents are deleted here):
 * - the parent of a key idle here for `parentCleanupDelay` (keys are noted with the time they
 *   went idle, and one timer at a time deletes the due ones: no timer per release);
 * - at start, the empty parents under the root that processes left when they died;
 * - nodes whose delete failed, or whose create got no answer, once connected again.
 * A parent that has children is not deleted (NOT_EMPTY, harmless); a create that finds its
 * parent gone makes it again.
 * @internal
 */
export class NodeCleanup {
  private readonly idleSince = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  /** Nodes to delete once connected: deleted again until gone. */
  private readonly leftovers = new Set<string>();
  private retrying?: Promise<void>;
  private closed = false;

  constructor(
    private readonly session: ZooKeeperSession,
    private readonly scope: CleanupScope,
  ) {}

  /** Deletes a node, whatever its version. */
  remove(path: string): Promise<void> {
    return this.session.run((c, done) => c.remove(path, -1, (e) => done(e)));
  }

  /** The key was left by this process: its parent goes once it stays idle long enough. */
  keyIdle(key: string): void {
    if (this.closed || this.scope.inUse(key)) return;
    this.idleSince.delete(key);
    this.idleSince.set(key, performance.now());
    if (!this.timer) this.arm(this.scope.parentCleanupDelay);
  }

  /** The key is used again: its parent stays. */
  keyUsed(key: string): void {
    this.idleSince.delete(key);
  }

  /** A node still there (its delete failed) is deleted once the connection is back. */
  later(path: string): void {
    this.leftovers.add(path);
    this.retry();
  }

  /**
   * A create that got no answer: its node (named `<parent>/<prefix>...`, of this session), if
   * made, goes too.
   */
  findLater(parent: string, prefix: string): void {
    void (async () => {
      for (let attempt = 0; attempt < SWEEP_ATTEMPTS && !this.closed; attempt++) {
        try {
          await this.session.ready(this.scope.sessionTimeout);
          const children = await this.session.run((c, done: (e: unknown, r?: string[]) => void) =>
            c.getChildren(parent, (e, r) => done(e, r)),
          );
          for (const name of children) {
            if (!name.startsWith(prefix)) continue;
            const path = `${parent}/${name}`;
            // Only a node of this session: another process may make the same name (see owns).
            const stat = await this.session.run((c, done: (e: unknown, s?: Zk.Stat) => void) =>
              c.exists(path, (e, s) => done(e, s)),
            );
            if (this.session.owns(stat)) this.later(path);
          }
          return;
        } catch (error) {
          if (zkCode(error) === ZK.NO_NODE) return;
        }
      }
    })();
  }

  /** The session ended: its nodes went with it. */
  sessionEnded(): void {
    this.leftovers.clear();
  }

  /**
   * Deletes the empty parents under the root, in the background: those a process left when it
   * died (its nodes went with its session; nobody was left to delete the parent).
   */
  async sweepParents(): Promise<void> {
    const { root } = this.scope;
    try {
      const parents = await this.session.run((c, done: (e: unknown, r?: string[]) => void) =>
        c.getChildren(root, (e, r) => done(e, r)),
      );
      for (let i = 0; i < parents.length && !this.closed; i += SWEEP_BATCH) {
        await Promise.allSettled(
          parents.slice(i, i + SWEEP_BATCH).map((name) => this.remove(`${root}/${name}`)),
        );
      }
    } catch {
      // Housekeeping: the next start tries again.
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.idleSince.clear();
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.deleteIdleParents(), ms);
    this.timer.unref();
  }

  private deleteIdleParents(): void {
    this.timer = undefined;
    const due = performance.now() - this.scope.parentCleanupDelay;
    // In the order keys went idle: the first one not due yet says when to look again.
    for (const [key, since] of this.idleSince) {
      if (since > due) return this.arm(since - due + 1);
      this.idleSince.delete(key);
      if (this.scope.inUse(key)) continue;
      this.remove(this.scope.parentOf(key)).catch(() => undefined);
    }
  }

  private retry(): void {
    this.retrying ??= (async () => {
      while (this.leftovers.size > 0 && !this.closed) {
        try {
          await this.session.ready(this.scope.sessionTimeout);
        } catch {
          continue;
        }
        for (const path of [...this.leftovers]) {
          await this.remove(path).then(
            () => this.leftovers.delete(path),
            (e: unknown) => {
              if (zkCode(e) === ZK.NO_NODE) this.leftovers.delete(path);
            },
          );
        }
      }
    })().finally(() => (this.retrying = undefined));
  }
}
