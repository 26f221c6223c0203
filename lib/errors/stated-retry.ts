import type { LockNotAcquiredError } from './lock-not-acquired.error';

/** Busy answers whose `retryAfterMs` was stated, not estimated from a holder's lease. */
const stated = new WeakSet<LockNotAcquiredError>();

/**
 * Marks a busy answer whose `retryAfterMs` is a statement (a testing control's `busy(key, {
 * retryAfterMs })`), which no estimate of the key's usual hold may replace.
 * @internal
 */
export function withStatedRetry(error: LockNotAcquiredError): LockNotAcquiredError {
  stated.add(error);
  return error;
}

/** Whether `error`'s `retryAfterMs` was stated (see {@link withStatedRetry}). @internal */
export function isRetryStated(error: LockNotAcquiredError): boolean {
  return stated.has(error);
}
