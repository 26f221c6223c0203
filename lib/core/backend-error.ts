import { LockBackendError, LockConfigError } from '../errors';

/**
 * `error` as the LockBackendError of `operation` on `keys`, naming `system` (`etcd`,
 * `ZooKeeper`, `PostgreSQL`...); `describe` puts a driver's error in words. The errors of this
 * library that already say what to fix (a LockBackendError, a LockConfigError) pass as they are.
 * @internal
 */
export function asBackendError(
  keys: readonly string[],
  operation: string,
  error: unknown,
  system?: string,
  describe: (error: unknown) => Error = toError,
): LockBackendError | LockConfigError {
  if (error instanceof LockBackendError || error instanceof LockConfigError) return error;
  return new LockBackendError(keys, [describe(error)], operation, system);
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
