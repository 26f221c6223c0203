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
