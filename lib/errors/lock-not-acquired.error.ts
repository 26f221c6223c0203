import { LOCK_NOT_ACQUIRED } from './error.messages';
import { LockError } from './lock.error';

/**
 * The lock was still held by someone else when `waitTimeout` ran out. This is contention, never
 * an infrastructure failure (that is {@link LockBackendError}).
 *
 * Over HTTP, `LockInterceptor` answers `busyStatus` (409 by default) with a `Retry-After` header.
 *
 * @publicApi
 */
export class LockNotAcquiredError extends LockError {
  constructor(
    keys: readonly string[],
    /** How long the caller waited before giving up, in ms. */
    readonly waitedMs: number,
    /**
     * Best estimate of when the lock frees up, in ms from now (the holder's remaining lease, or
     * the time since it was last seen busy). Used for `Retry-After`.
     */
    readonly retryAfterMs: number,
  ) {
    super(LOCK_NOT_ACQUIRED(keys, waitedMs), keys);
  }
}
