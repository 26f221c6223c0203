import type { Etcd3, IKeyValue, IRangeRequest, IWatchResponse, WatchBuilder } from 'etcd3';
import type { LockCounts, Share } from '../core/lock-backend';
import { outageRetryDelay } from '../core/wait-rules';
import { LockBackendError } from '../errors';
import { ETCD_SESSION_LOST, ETCD_WAITING_KEY_GONE } from './etcd.messages';
import { OTHER_PART, prefixEnd } from './etcd-names';
import type { EtcdWait } from './etcd-wait';
import type { OwnKeys } from './etcd-own-keys';

/**
 * How a caller waits in the lines of its keys once its entry is in: by create revision, with at
 * most one watch per waiter (on the client's one shared watch stream) and no polling; behind a
 * key of this process, with no watch at all (its deletion is heard here, see `OwnKeys`).
 *
 * A waiter is granted only while its own key is still there (Go's `Mutex.Lock` reads it after
 * `waitDeletes` too): its session lease revoked on the server deletes it, and the keys before
 * it with it when they are of the same session, and nothing else tells this process until its
 * next keep-alive. The read that finds nobody before the caller reads its key as well (one
 * transaction), a permit waiter's watch sees its key's deletion, and a waiter handed the lock
 * by a holder of this process reads its key before it goes. A key gone ends the session (see
 * `keyGone`).
 * @internal
 */
export class LineWaits {
  constructor(
    private readonly client: Etcd3,
    private readonly stats: LockCounts,
    private readonly keys: OwnKeys,
  ) {}

  /** Waits until the caller's key `own` in `line` (created at `revision`) is granted. */
  async waitInLine(
    wait: EtcdWait,
    line: string,
    own: string,
    revision: string,
    share: Share | undefined,
    before: IKeyValue | undefined,
    seen: string,
  ): Promise<void> {
    for (let failures = 1; ; failures++) {
      try {
        if (typeof share === 'number') {
          await this.waitForPermit(wait, line, own, revision, share);
        } else {
          const range = share === 'read' ? line + OTHER_PART : line;
          await this.waitForPredecessors(wait, range, own, revision, before, seen);
        }
        return;
      } catch {
        // A retry asks who is before the caller again.
        before = undefined;
        if (wait.aborted) throw wait.reason;
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
   * handoff, with no watch event and no query to wait for: only a read of the caller's key).
   */
  private async waitForPredecessors(
    wait: EtcdWait,
    range: string,
    own: string,
    revision: string,
    /** The last key before the caller's, as of revision `seen`, if known. */
    before: IKeyValue | undefined,
    seen: string,
  ): Promise<void> {
    const start = Buffer.from(range);
    const lastBefore: IRangeRequest = {
      key: start,
      range_end: prefixEnd(start),
      max_create_revision: String(BigInt(revision) - 1n),
      sort_order: 'Descend',
      sort_target: 'Create',
      limit: 1,
      keys_only: true,
    };
    let known = before;
    let from = seen;
    for (;;) {
      if (!known) {
        // Who is last before the caller, and whether the caller's key is still there.
        const res = await this.client.kv.txn({
          success: [{ request_range: lastBefore }, { request_range: ownKey(own) }],
        });
        if (wait.aborted) throw wait.reason;
        const [last, mine] = res.responses.map((r) => r.response_range.kvs[0]);
        if (mine?.create_revision !== revision) this.keyGone(wait);
        if (!last) return;
        known = last;
        from = res.header.revision;
      }
      if (await this.predecessorGone(wait, known, String(BigInt(from) + 1n))) {
        return this.confirmOwn(wait, own, revision);
      }
      known = undefined;
    }
  }

  /** Reads the caller's key: it goes on if the key is still there (see the class's note). */
  private async confirmOwn(wait: EtcdWait, own: string, revision: string): Promise<void> {
    const res = await this.client.kv.range(ownKey(own));
    if (wait.aborted) throw wait.reason;
    if (res.kvs[0]?.create_revision !== revision) this.keyGone(wait);
  }

  /**
   * The caller's key is gone while it waits: its session lease was revoked or ran out (or
   * someone deleted the key). Every key of the session may be gone with it, so the session
   * ends (its holders lose their locks, its waiters enter again under a new one while they
   * have time left, see `EtcdLockBackend.sessionEnded`). Throws the wait's reason.
   */
  private keyGone(wait: EtcdWait): never {
    const cause = new Error(ETCD_WAITING_KEY_GONE);
    wait.session.end(cause);
    // Ending the session aborted the wait, unless the session had ended before it began.
    wait.abort(
      new LockBackendError(wait.keys, [new Error(ETCD_SESSION_LOST(cause))], 'acquire', 'etcd'),
    );
    throw wait.reason;
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
   * of them permits of N. It watches the line's deletions and counts (no query per deletion);
   * its own key's deletion among them ends the wait (see `keyGone`).
   */
  private async waitForPermit(
    wait: EtcdWait,
    line: string,
    own: string,
    revision: string,
    permits: number,
  ): Promise<void> {
    const start = Buffer.from(line);
    // The keys before the caller's, and the caller's own (the only one created at `revision`).
    const res = await this.client.kv.range({
      key: start,
      range_end: prefixEnd(start),
      max_create_revision: revision,
    });
    if (wait.aborted) throw wait.reason;
    if (!res.kvs.some((kv) => kv.key.toString() === own && kv.create_revision === revision)) {
      this.keyGone(wait);
    }
    const value = String(permits);
    const before = new Map(res.kvs.map((kv) => [kv.key.toString(), kv.value.toString()]));
    before.delete(own);
    const admitted = () =>
      before.size < permits && [...before.values()].every((kind) => kind === value);
    if (admitted()) return;
    const from = String(BigInt(res.header.revision) + 1n);
    await this.deletion(
      wait,
      (w) => w.prefix(line).startRevision(from),
      // One revision's deletions at once: a revoke deletes the caller's key with the others.
      (kvs) => {
        for (const kv of kvs) {
          const name = kv.key.toString();
          if (name === own) this.keyGone(wait);
          before.delete(name);
        }
        return admitted();
      },
    );
  }

  /**
   * Resolves once the watch `build` makes reports deletions that `enough` accepts (all those of
   * one revision at once): false; or, when `predecessor` is given, once a holder of this process
   * released that key: true. Rejects with what `enough` throws.
   */
  private deletion(
    wait: EtcdWait,
    build: ((watch: WatchBuilder) => WatchBuilder) | undefined,
    enough: (kvs: readonly IKeyValue[]) => boolean,
    predecessor?: string,
  ): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const watcher = build?.(this.client.watch()).only('delete').watcher();
      let settled = false;
      const done = (error?: unknown, handedOver = false) => {
        if (settled) return;
        settled = true;
        off();
        if (predecessor !== undefined) this.keys.successors.remove(predecessor, heard);
        if (watcher) {
          watcher.off('data', deleted);
          void watcher.cancel().catch(() => undefined);
        }
        if (error === undefined) resolve(handedOver);
        else reject(error);
      };
      const heard = (handedOver: boolean) => done(undefined, handedOver);
      const deleted = (res: IWatchResponse) => {
        if (res.events.length === 0) return;
        this.stats.notifiedWakeups++;
        try {
          if (enough(res.events.map((event) => event.kv))) done();
        } catch (error) {
          done(error);
        }
      };
      const off = wait.onAbort(done);
      if (predecessor !== undefined) this.keys.successors.add(predecessor, heard);
      watcher?.on('data', deleted);
      watcher?.on('error', (error) => done(error));
    });
  }
}

/** A read of the caller's key `own` (its create revision tells whether it is still its own). */
function ownKey(own: string): IRangeRequest {
  return { key: Buffer.from(own), keys_only: true };
}
