import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockContextInfo } from './interfaces';

/** A hold as seen by reentrant calls. @internal */
export interface HoldRecord {
  active: boolean;
}

/** @internal */
export interface LockScope {
  readonly info: LockContextInfo;
  /** Every key held in this async context, `<client>\0<key>` -> its hold. */
  readonly held: ReadonlyMap<string, HoldRecord>;
}

// One AsyncLocalStorage, owned here: holds follow the async context of the call that took them,
// so a nested call of the same request re-enters and a different request never does.
const storage = new AsyncLocalStorage<LockScope>();

/** @internal */
export const holdId = (client: string, key: string): string => `${client}\0${key}`;

/**
 * Access to the lock held by the current call.
 *
 * @example
 * ```ts
 * @Locked('report:{id}')
 * async build(id: string) {
 *   const { fence, signal } = LockContext.current()!;
 *   await this.reports.save(id, data, { fence });
 *   if (signal.aborted) return; // the lock was lost while we worked
 * }
 * ```
 * @publicApi
 */
export class LockContext {
  private constructor() {}

  /**
   * The innermost lock of this async context: `{ keys, fence, fences, segment?, signal,
   * acquiredAt, waitedMs }`, or `undefined` outside a locked call.
   */
  static current(): LockContextInfo | undefined {
    return storage.getStore()?.info;
  }

  /** @internal */
  static scope(): LockScope | undefined {
    return storage.getStore();
  }

  /** @internal */
  static run<T>(scope: LockScope, fn: () => T): T {
    return storage.run(scope, fn);
  }
}
