import type { Etcd3, IKeyValue, WatchBuilder } from 'etcd3';
import type { LockClientStats, Share } from '../engine/lock-backend';
import { outageRetryDelay } from '../engine/wait-rules';
import { OTHER_PART, prefixEnd } from './etcd-names';
import type { EtcdWait } from './etcd-wait';
import type { OwnKeys } from './etcd-own-keys';

/**
 * How a caller waits in the lines of its keys once its entry is in: by create revision, with at
 * most one watch per waiter (on the client's one shared watch stream) and no polling; behind a
 * key of this process, with no watch at all (its deletion is heard here, see `OwnKeys`).
 * @internal
 */
export class LineWaits {
  constructor(
    private readonly client: Etcd3,
    private readonly stats: LockClientStats,
    private readonly keys: OwnKeys,
  ) {}

  /** Waits until the caller's key in `line` (created at `revision`) is granted. */
  async waitInLine(
    wait: EtcdWait,
    line: string,
    revision: string,
    share: Share | undefined,
    before: IKeyValue | undefined,
    seen: string,
  ): Promise<void> {
    for (let failures = 1; ; failures++) {
      try {
        if (typeof share === 'number') await this.waitForPermit(wait, line, revision, share);
        else {
          const range = share === 'read' ? line + OTHER_PART : line;
          await this.waitForPredecessors(wait, range, revision, before, seen);
        }
        return;
      } catch {
        // A retry asks who is before the caller again.
        before = undefined;
        if (wait.cancelled) throw wait.reason;
        // etcd failed a query or a watch: try again while the wait lasts (its deadline asks
        // etcd once more, see `EtcdWait.onDeadline`).
        await wait.pause(outageRetryDelay(failures, wait.deadline));
      }
    }
  }

  /**
   * Go's `waitDeletes`: while a key of `range` was created before the caller's, watch the
   * deletion of the last such key (and of nothing else), then ask again: that key may have
   * given up while others before it are still there. Unless an exclusive holder of this
   * process deleted it: it was alone in its line, so nobody is left before the caller (a local
   * handoff, with no watch event and no query to wait for).
   */
  private async waitForPredecessors(
    wait: EtcdWait,
    range: string,
    revision: string,
    /** The last key before the caller's, as of revision `seen`, if known. */
    before: IKeyValue | undefined,
    seen: string,
  ): Promise<void> {
    const start = Buffer.from(range);
    const end = prefixEnd(start);
    for (let known = before; ; known = undefined) {
      if (known) {
        const from = String(BigInt(seen) + 1n);
        if (await this.predecessorGone(wait, known, from)) return;
        continue;
      }
      const res = await this.client.kv.range({
        key: start,
        range_end: end,
        max_create_revision: String(BigInt(revision) - 1n),
        sort_order: 'Descend',
        sort_target: 'Create',
        limit: 1,
        keys_only: true,
      });
      if (wait.cancelled) throw wait.reason;
      const last = res.kvs[0];
      if (!last) return;
      const from = String(BigInt(res.header.revision) + 1n);
      if (await this.predecessorGone(wait, last, from)) return;
    }
  }

  /**
   * Watches the deletion of `key` from revision `from` on; true when a holder of this process
   * deleted it (nobody is left before the caller), false when the watch saw it go.
   */
  private predecessorGone(wait: EtcdWait, predecessor: IKeyValue, from: string): Promise<boolean> {
    const { key } = predecessor;
    const name = key.toString();
    // A key of this process in the waiter's session: its deletion is heard here (see `OwnKeys`).
    const local = this.keys.owns(name, predecessor.create_revision, wait.session);
    return this.deletion(
      wait,
      local ? undefined : (w) => w.key(key).startRevision(from),
      () => true,
      name,
    );
  }

  /**
   * Permits of N: the caller is in once fewer than N keys created before its own are left, all
   * of them permits of N. It watches the line's deletions and counts (no query per deletion).
   */
  private async waitForPermit(
    wait: EtcdWait,
    line: string,
    revision: string,
    permits: number,
  ): Promise<void> {
    const start = Buffer.from(line);
    const res = await this.client.kv.range({
      key: start,
      range_end: prefixEnd(start),
      max_create_revision: String(BigInt(revision) - 1n),
    });
    if (wait.cancelled) throw wait.reason;
    const value = String(permits);
    const before = new Map(res.kvs.map((kv) => [kv.key.toString(), kv.value.toString()]));
    const admitted = () =>
      before.size < permits && [...before.values()].every((kind) => kind === value);
    if (admitted()) return;
    const from = String(BigInt(res.header.revision) + 1n);
    await this.deletion(
      wait,
      (w) => w.prefix(line).startRevision(from),
      (kv) => before.delete(kv.key.toString()) && admitted(),
    );
  }

  /**
   * Resolves once the watch `build` makes reports a deletion that `enough` accepts: false; or,
   * when `predecessor` is given, once a holder of this process released that key: true.
   */
  private deletion(
    wait: EtcdWait,
    build: ((watch: WatchBuilder) => WatchBuilder) | undefined,
    enough: (kv: IKeyValue) => boolean,
    predecessor?: string,
  ): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const watcher = build?.(this.client.watch()).only('delete').watcher();
      const done = (error?: unknown, handedOver = false) => {
        off();
        if (predecessor !== undefined) this.keys.successors.remove(predecessor, heard);
        if (watcher) {
          watcher.removeAllListeners('delete');
          void watcher.cancel().catch(() => undefined);
        }
        if (error === undefined) resolve(handedOver);
        else reject(error);
      };
      const heard = (handedOver: boolean) => done(undefined, handedOver);
      const off = wait.onCancel(done);
      if (predecessor !== undefined) this.keys.successors.add(predecessor, heard);
      watcher?.on('delete', (kv) => {
        this.stats.notifiedWakeups++;
        if (enough(kv)) done();
      });
      watcher?.on('error', (error) => done(error));
    });
  }
}
