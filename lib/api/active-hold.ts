import type { LockLostError } from '../errors';
import type { Lease, LockBackend } from '../core/lock-backend';
import type { WatchedHold, Watchdog } from '../watchdog/watchdog';
import type { HoldRecord } from './lock-context';

/** What a hold needs of the service that runs it (one object per service, not per hold). */
export interface HoldOwner {
  /** The hold's watchdog found the lock lost or run out. */
  lost(hold: ActiveHold, error: LockLostError): void;
  /** Stops the watchdog and releases, once. */
  finish(hold: ActiveHold): Promise<void>;
  /** A call in the hold ended: the last one out releases (see `ActiveHold.leave`). */
  leave(hold: ActiveHold, done: () => void): void;
}

/**
 * A lock held right now by a call of this process: its lease, the group it lives in, its
 * watchdog, and the holder's lost signal (created on first use: most calls never look at it).
 * It is its own record for reentrant calls and its watchdog's listener, so a hold allocates no
 * closure and no extra object (100,000 holds at once are normal).
 * @internal
 */
export class ActiveHold implements HoldRecord, WatchedHold {
  watchdog?: Watchdog;
  /** Seen by reentrant calls: whether the hold still counts. */
  active = true;
  /**
   * Calls running in the hold: the one that took it, and the nested calls that re-entered it.
   * The hold is released when the last of them ends, so a nested call nobody awaits never runs
   * unlocked.
   */
  calls = 1;
  /** ms the lock stays held after it was taken, even if the call ends sooner (`minHold`). */
  minHold = 0;
  /** `'read'` for a shared read hold, else `'write'` (exclusive or a permit). */
  mode: 'read' | 'write' = 'write';
  /** How many holders the key admits (`permits`; 1 for exclusive and read holds). */
  permits = 1;
  /** Where it was taken (`Class.method`); undefined for `using` and `acquire`. */
  site?: string = undefined;
  /** Its links in the service's chain of holds in progress. */
  prev?: ActiveHold;
  next?: ActiveHold;
  private controller?: AbortController;
  /** Why the hold was lost, if it was before anyone asked for the signal. */
  private lostReason?: LockLostError;

  constructor(
    readonly lease: Lease,
    readonly client: LockBackend,
    private readonly owner: HoldOwner,
  ) {}

  /** The holder's signal, aborted with a LockLostError once the hold is lost. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostReason) this.controller.abort(this.lostReason);
    }
    return this.controller.signal;
  }

  /** Aborts the signal (once; the first reason stands). */
  abort(reason: LockLostError): void {
    if (this.controller) {
      if (!this.controller.signal.aborted) this.controller.abort(reason);
    } else {
      this.lostReason ??= reason;
    }
  }

  /** Called by its watchdog: the lock is lost. */
  onLost(error: LockLostError): void {
    this.owner.lost(this, error);
  }

  /** Stops the watchdog and releases the lock (once), whoever is still inside. */
  release(): Promise<void> {
    return this.owner.finish(this);
  }

  /** A nested call re-enters the hold: it is released only once that call has ended too. */
  enter(): void {
    this.calls++;
  }

  /**
   * A call in the hold ended: `done` runs at once while other calls are still inside (the hold
   * goes on, renewed), else once the release answered (or RELEASE_ANSWER_WAIT_MS after it was
   * sent: see `ActiveHolds.finishThen`).
   */
  leave(done: () => void): void {
    this.owner.leave(this, done);
  }
}
