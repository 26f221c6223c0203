import { LOCK_LOST } from './error.messages';
import { LockError } from './lock.error';

/** Why a held lock was lost. */
export type LockLostReason =
  /** A renewal found the key gone or owned by another holder (expired, deleted, stolen). */
  | 'lost'
  /** Renewals kept failing (network) until the lease ran out. */
  | 'expired'
  /** `maxHold` was reached; the watchdog stopped renewing on purpose. */
  | 'maxHold'
  /** The application shut down while the method was still running. */
  | 'shutdown';

/**
 * The abort reason of `LockContext.current().signal` (and of a handle's `signal`) when the lock
 * is lost while the method still runs. Not thrown by default: the method's own result stands,
 * code that must not act without the lock checks `signal.aborted` or uses the fence.
 *
 * @publicApi
 */
export class LockLostError extends LockError {
  constructor(
    keys: readonly string[],
    readonly reason: LockLostReason,
    cause?: unknown,
  ) {
    super(LOCK_LOST(keys, reason), keys, cause);
  }
}
