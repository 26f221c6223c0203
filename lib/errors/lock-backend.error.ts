import { LOCK_BACKEND_FAILED } from './error.messages';
import { failureHint } from './failure-hint';
import { LockError } from './lock.error';

/**
 * The lock servers could not be asked (Redis, or the group's other backend): nodes unreachable,
 * too many nodes failing for a quorum, a script error, a timeout. Never used for contention (that is {@link LockNotAcquiredError}).
 * Its message ends with what to check, picked from the first failure's cause (`failureHint`).
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
    /** The system that failed, as the message names it: `Redis`, or a backend's (`etcd`...). */
    system = 'Redis',
  ) {
    super(
      LOCK_BACKEND_FAILED(keys, operation, failures, system, failureHint(failures)),
      keys,
      failures[0],
    );
  }
}
