import { LockError } from './lock.error';

/**
 * A lock key could not be built: a template names a parameter that does not exist (thrown at
 * decoration time), or an argument gives a value that cannot be part of a key (`undefined`,
 * `null`, `''`, `NaN`, an object...), or the key is too long (thrown at call time, before
 * anything is locked).
 *
 * Over HTTP, `LockInterceptor` answers 400.
 *
 * @publicApi
 */
export class LockKeyError extends LockError {
  constructor(
    message: string,
    /** The template (or `fn` for the function form) the key came from. */
    readonly template: string,
    /** The placeholder that failed, without braces, when one did. */
    readonly placeholder?: string,
    cause?: unknown,
  ) {
    super(message, [], cause);
  }
}
