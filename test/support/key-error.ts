import { LockKeyError } from '../../lib/errors';

/** Runs `fn`, expects it to throw a LockKeyError and returns it, for assertions on its fields. */
export function keyError(fn: () => unknown): LockKeyError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LockKeyError);
    return error as LockKeyError;
  }
  throw new Error('expected a LockKeyError, nothing was thrown');
}
