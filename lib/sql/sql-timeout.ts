/**
 * A database call that did not answer in time (a stalled server, a pool with no free
 * connection): the engine stops waiting for it; what it was doing goes on in the background.
 * @internal
 */
export class SqlTimeoutError extends Error {
  constructor(
    /** What was asked: `connect`, `lock`, `keep-alive`... */
    readonly what: string,
    readonly ms: number,
  ) {
    super(`no answer to ${what} within ${Math.round(ms)} ms`);
    this.name = 'SqlTimeoutError';
  }
}

/**
 * `work`, or a rejection with SqlTimeoutError after `ms` (or with what `stop` is given first).
 * `late` receives a value that arrives after the caller stopped waiting (a connection to give
 * back to the pool).
 * @internal
 */
export function within<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  late?: (value: T) => void,
  stop?: (reject: (reason: unknown) => void) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => fail(new SqlTimeoutError(what, ms)), Math.max(1, ms));
    function fail(reason: unknown): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(reason);
    }
    stop?.(fail);
    work.then(
      (value) => {
        if (settled) return late?.(value);
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => fail(error),
    );
  });
}
