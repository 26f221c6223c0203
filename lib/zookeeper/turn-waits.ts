import { performance } from 'node:perf_hooks';
import type { LockCounts, Share } from '../core/lock-backend';
import { abortReason } from '../core/wait-rules';
import type { AbortableWait } from '../core/session-backend';
import type { HeldNode, ZnodeLines } from './znode-lines';
import { backendError } from './zookeeper-errors';
import { type ZooKeeperSession, zkCode, ZK } from './zookeeper-session';

/**
 * A wait in progress, ended early by an expired session or `abortWaits`: `abort` is set by
 * whatever the wait is doing now (a back-off, a turn). @internal
 */
export interface Wait extends AbortableWait {
  abort(reason: unknown): void;
}

/** What waiting for a turn needs from the backend. @internal */
export interface TurnScope {
  readonly session: ZooKeeperSession;
  readonly lines: ZnodeLines;
  readonly stats: LockCounts;
  parentOf(key: string): string;
  /** Whether the backend is closing (no new wait starts). */
  isClosed(): boolean;
}

/**
 * Waiting for one's turn in a key's line, without polling and without a herd: a waiter watches
 * the nodes ahead whose leaving can let it in (a data watch each) and looks at the line again
 * when one goes. A waiter of this process right behind a hold of this process is told at once
 * when that hold ends (`handOff`): no watch event, no look at the line.
 * @internal
 */
export class TurnWaits {
  /**
   * Exclusive waiters of this process by the path of the node just ahead of theirs: when that
   * node is an exclusive hold that ends here, the waiter is first in line, so it is told at once
   * (the delete goes out behind it, and this session's requests keep order).
   */
  private readonly successors = new Map<string, () => void>();

  constructor(private readonly scope: TurnScope) {}

  /**
   * Waits until `node` is admitted. False at the deadline once one last look at the line (one
   * round trip) found it still not admitted: a ZooKeeper that does not answer then rejects
   * (LockBackendError), so an outage is not taken for a busy key. Rejects on abort or a lost
   * session (through `wait.abort`).
   */
  async waitTurn(
    node: HeldNode,
    share: Share | undefined,
    keys: readonly string[],
    deadline: number,
    signal: AbortSignal | undefined,
    wait: Wait,
  ): Promise<boolean> {
    for (;;) {
      const verdict = await this.scope.lines.look(node, share, keys);
      if (verdict.admitted) return true;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      const parent = this.scope.parentOf(node.key);
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
          wait.abort = () => undefined;
          if (outcome) resolve(outcome);
          else reject(reason);
        };
        const onAbort = () => finish(undefined, signal!.reason);
        const timer = setTimeout(() => finish('deadline'), left);
        signal?.addEventListener('abort', onAbort);
        wait.abort = (reason) => finish(undefined, reason);
        // Aborted (or the app closing) while it was still looking at the line: the listener and
        // `wait.abort` came too late to hear it.
        if (signal?.aborted) return onAbort();
        if (this.scope.isClosed()) return finish(undefined, abortReason(keys));
        if (successorOf) this.successors.set(successorOf, admit);
        for (const ahead of verdict.watch) {
          const path = `${parent}/${ahead.name}`;
          // A data watch (Curator's choice): it fires once, when the node is deleted, and a
          // node already gone answers NO_NODE and leaves no watch behind (an exists watch would
          // stay on the server and in the driver until the session ends).
          this.scope.session
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
                  : finish(undefined, backendError(keys, 'acquire', error)),
            );
        }
      });
      if (outcome === 'admitted') return true;
      // 'moved', or 'deadline': the look at the top is then the last word.
    }
  }

  /**
   * The exclusive holds of these nodes end: the waiter of this process right behind each goes
   * in. Only for exclusive holds (the head of their lines): behind a read or permit hold, the
   * waiter is not necessarily next.
   */
  handOff(nodes: readonly HeldNode[]): void {
    for (const node of nodes) {
      const next = this.successors.get(node.path);
      if (!next) continue;
      this.successors.delete(node.path);
      this.scope.stats.localHandoffs++;
      next();
    }
  }
}
