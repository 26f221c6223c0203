import type { LockLostError } from '../errors';
import type { Lease, LockBackend } from '../engine/lock-backend';
import type { Watchdog } from '../watchdog/watchdog';
import type { HoldRecord } from './lock-context';

/**
 * A lock held right now by a call of this process: its lease, the group it lives in, its
 * watchdog, and the holder's lost signal (created on first use: most calls never look at it).
 * @internal
 */
export class ActiveHold {
  watchdog?: Watchdog;
  /** ms the lock stays held after it was taken, even if the call ends sooner (`minHold`). */
  minHold = 0;
  /** `'read'` for a shared read hold, else `'write'` (exclusive or a permit). */
  mode: 'read' | 'write' = 'write';
  /** How many holders the key admits (`permits`; 1 for exclusive and read holds). */
  permits = 1;
  /** Seen by reentrant calls: whether the hold still counts. */
  readonly record: HoldRecord = { active: true };
  /** Its links in the service's chain of holds in progress. */
  prev?: ActiveHold;
  next?: ActiveHold;
  private controller?: AbortController;
  /** Why the hold was lost, if it was before anyone asked for the signal. */
  private lostReason?: LockLostError;

  constructor(
    readonly lease: Lease,
    readonly client: LockBackend,
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
}
