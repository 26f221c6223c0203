/**
 * The other way round: a promise of what `start` reports to its callback (`error` undefined:
 * fulfilled with `value`). For the promise forms of the methods that answer by callback.
 * @internal
 */
export function promiseFrom<T = void>(
  start: (done: (error: unknown, value?: T) => void) => void,
): Promise<T> {
  return new Promise((resolve, reject) =>
    start((error, value) => (error === undefined ? resolve(value as T) : reject(error))),
  );
}

/**
 * Passes a promise's outcome to a callback, once: `error` undefined when it was fulfilled (a
 * rejection without a reason becomes an Error, so it still reads as a failure). For the paths
 * that answer by callback (`releaseThen`) where a step still makes a promise.
 * @internal
 */
export function settleTo(promise: Promise<unknown>, done: (error?: unknown) => void): void {
  promise.then(
    () => done(),
    (error: unknown) => done(error ?? new Error('release failed')),
  );
}
