import type { Etcd3 } from 'etcd3';
import type { LockCounts } from '../core/lock-backend';
import type { EtcdSession } from './etcd-session';
import { cancelMark, noNewerThan, put } from './etcd-requests';
import { Successors } from './etcd-successors';

/** Pause between tries at deleting keys whose first delete failed (see `discard`). */
const DISCARD_RETRY_MS = 200;
/** Tries at deleting the keys of a `minHold` once it is over (they have a lease of their own). */
const MIN_HOLD_DELETE_TRIES = 20;

/**
 * The keys this process has in etcd (held, waiting, kept for a minHold) and their deletion:
 * every deletion of one goes through here, so a waiter of this process behind one of them
 * needs no watch (`successors`), and a delete that fails is tried again.
 * @internal
 */
export class OwnKeys {
  /** Waiters of this process by the key they wait to see deleted. */
  readonly successors = new Successors();
  /**
   * Each key of this process in etcd: its session and create revision (a name is used again
   * once its key is deleted, see `EtcdSession.reuse`).
   */
  private readonly own = new Map<string, { session: EtcdSession; revision: string }>();

  constructor(
    private readonly client: Etcd3,
    private readonly keyPrefix: string,
    private readonly stats: LockCounts,
    /** True once failed deletes are no longer worth trying again (the client is closed). */
    private readonly stopped: () => boolean,
  ) {}

  /** `names` are in etcd (or may be) for `session`. */
  add(names: readonly string[], session: EtcdSession, revision: string): void {
    for (const name of names) this.own.set(name, { session, revision });
  }

  /** Whether the key `name` created at `revision` is a key of this process in `session`. */
  owns(name: string, revision: string, session: EtcdSession): boolean {
    const own = this.own.get(name);
    return own !== undefined && own.session === session && own.revision === revision;
  }

  /** The session ended: etcd deletes its keys itself. */
  forgetSession(session: EtcdSession): void {
    for (const [name, own] of this.own) if (own.session === session) this.own.delete(name);
  }

  /**
   * Deletes the keys `names` created at `revision`; `handedOver`: see `gone`. Their names are
   * then free for `session`'s later keys in the same lines (see `EtcdSession.reuse`). The
   * delete reaches those keys only, never a later key with one of their names: a delete whose
   * answer was lost may still be applied by etcd after a retry deleted the keys and the name
   * was taken again (a partition, a leader change), and would delete a hold's key.
   */
  async remove(
    names: readonly string[],
    revision: string,
    handedOver = false,
    session?: EtcdSession,
  ): Promise<void> {
    const res = await this.client.kv.txn({
      compare: noNewerThan(names, revision),
      success: names.map((name) => ({ request_delete_range: { key: Buffer.from(name) } })),
    });
    // A later key has one of the names: these keys were deleted already, and the name is not free.
    if (!res.succeeded) return;
    this.gone(names, handedOver, revision);
    session?.reuse(names);
  }

  /** An exclusive hold of this process ends: its waiters of this process go (see `EtcdLockBackend.release`). */
  handOver(names: readonly string[]): void {
    for (const name of names) if (this.successors.wake(name, true)) this.stats.localHandoffs++;
  }

  /**
   * Keys of this process are deleted: the waiters of this process behind them go on at once
   * (see `LineWaits`); `handedOver` when they were an exclusive hold's. `revision`: theirs, when
   * known (a later key with the same name stays known).
   */
  private gone(names: readonly string[], handedOver: boolean, revision?: string): void {
    for (const name of names) {
      if (revision === undefined || this.own.get(name)?.revision === revision) {
        this.own.delete(name);
      }
      if (this.successors.wake(name, handedOver) && handedOver) this.stats.localHandoffs++;
    }
  }

  /**
   * Deletes the keys `names` created at `revision` in the background, trying again while it
   * fails: while their session lives (once it ends, etcd deletes them), or a few times for keys
   * with a lease of their own.
   */
  discard(names: readonly string[], revision: string, session: EtcdSession | undefined): void {
    this.retry(() => this.remove(names, revision, false, session), session);
  }

  /**
   * An acquire whose answer never came (a timeout, a connection lost): etcd may still apply it
   * later, after any delete of ours, and the keys would then wait in their lines for a caller
   * that left. So one transaction deletes them and puts the call's cancel mark, bound to the
   * session: the acquire's transaction requires that mark absent, so a late one does nothing.
   * The mark is one small key outside every line; it goes with the session.
   */
  abandon(names: readonly string[], session: EtcdSession): void {
    const mark = cancelMark(this.keyPrefix, names);
    this.retry(async () => {
      await this.client.kv.txn({
        success: [
          put(mark, '', session.id),
          ...names.map((name) => ({ request_delete_range: { key: Buffer.from(name) } })),
        ],
      });
      this.gone(names, false);
    }, session);
  }

  private retry(attempt: () => Promise<unknown>, session: EtcdSession | undefined): void {
    let tries = 0;
    const run = (): void => {
      attempt().catch(() => {
        tries++;
        const more = session ? !session.ended : tries < MIN_HOLD_DELETE_TRIES;
        if (more && !this.stopped()) {
          setTimeout(run, DISCARD_RETRY_MS).unref();
        }
      });
    };
    run();
  }
}
