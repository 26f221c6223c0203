import { LOCK_BACKEND_FAILED } from '../redlock.messages';
import { LockError } from './lock.error';

/**
 * Redis could not be asked: nodes unreachable, too many nodes failing for a quorum, a script
 * error, a timeout. Never used for contention (that is {@link LockNotAcquiredError}).
 *
 * Over HTTP, `LockInterceptor` answers 503.
 *
 * @publicApi
 */
export class LockBackendError extends LockError {
  constructor(
    keys: readonly string[],
    /** What went wrong on each failing node. The first one is also the `cause`. */
    readonly failures: readonly Error[],
    operation = 'acquire',
  ) {
    super(LOCK_BACKEND_FAILED(keys, operation, failures), keys, failures[0]);
  }
}
