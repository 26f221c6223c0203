import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockContextInfo } from '../interfaces';
import type { HeldChain } from '../lock-order/held-chain';

/** A hold as seen by reentrant calls (see `ActiveHold`). @internal */
export interface HoldRecord {
  active: boolean;
  /** Where the hold was taken (`Class.method`), for reports; absent for `using`/`acquire`. */
  readonly site?: string;
  /** A nested call comes in: the hold is not released before it ends. */
  enter(): void;
  /** A call in it ended: `done` at once, or after the release when it was the last one. */
  leave(done: () => void): void;
}

/** @internal */
export interface LockScope {
  readonly info: LockContextInfo;
  /** The client group and the keys this scope took (not those its parents hold). */
  readonly client: string;
  readonly keys: readonly string[];
  readonly record: HoldRecord;
  /** The enclosing locked call's scope, if any. */
  readonly parent?: LockScope;
  /** How the scope holds its keys: `'read'`, or `'write'` (exclusive or permits). */
  readonly mode: 'read' | 'write';
  /** Permits of the key (1: exclusive, or read). */
  readonly permits: number;
  /** The lock classes held in this scope and its parents (lock-order checking on). */
  readonly chain?: HeldChain;
}

/**
 * Whether this async context holds `key` of `client`: the innermost scope that took it decides
 * (a hold that ended no longer counts). @internal
 */
export function holdsInScope(scope: LockScope | undefined, client: string, key: string): boolean {
  return holderInScope(scope, client, key) !== undefined;
}

/** The scope of this async context that holds `key` of `client` now, if any. @internal */
export function holderInScope(
  scope: LockScope | undefined,
  client: string,
  key: string,
): LockScope | undefined {
  for (let s = scope; s; s = s.parent) {
    if (s.client === client && s.keys.includes(key)) return s.record.active ? s : undefined;
  }
  return undefined;
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
