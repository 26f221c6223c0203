/**
 * Base class of every error nest-locked throws. Transport-agnostic: HTTP and RPC mapping lives in
 * `LockInterceptor`, so these errors are as usable from a cron job as from a controller.
 *
 * @publicApi
 */
export abstract class LockError extends Error {
  /** The lock keys involved (rendered keys, without the module's `keyPrefix`). */
  readonly keys: readonly string[];

  protected constructor(message: string, keys: readonly string[], cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.keys = Object.freeze([...keys]);
  }
}
