import type { LockBehaviourOptions } from './redlock-module-options.interface';

/** Per-call options of `@Locked` and of `LockService.using` / `acquire`. */
export interface LockedOptions extends LockBehaviourOptions {
  /**
   * The client group to lock in (a key of the module's `clients` record).
   * @default 'default'
   */
  client?: string;
  /**
   * Segmented strategy: the key names a resource split into this many slices, each its own lock
   * (`stock:{sku}` -> `stock:{sku}:seg:0` ... `:seg:N-1`). A call takes any free slice and reads
   * its index from `LockContext.current().segment`.
   */
  segments?: number;
  /**
   * What a call does when the lock is still busy after `waitTimeout`: `'throw'` rejects with
   * `LockNotAcquiredError`; `'skip'` resolves with `undefined` without running the method (for
   * `@Cron` jobs that only one instance should run, with `waitTimeout: 0`).
   * @default 'throw'
   */
  onBusy?: 'throw' | 'skip';
  /**
   * The least time, in ms, the lock stays held after it was taken, even when the method returns
   * sooner: the release then leaves the key to expire at that moment instead of deleting it (no
   * caller of any process, this one included, gets it earlier). With `waitTimeout: 0` and
   * `onBusy: 'skip'`, a `@Cron` job runs once per tick across instances whose clocks (and
   * schedulers) differ by less than `minHold`. Keep it below the job's period.
   * @default 0
   * @example
   * ```ts
   * @Cron(CronExpression.EVERY_MINUTE)
   * @Locked('cron:cleanup', { waitTimeout: 0, onBusy: 'skip', minHold: 10_000 })
   * async cleanup() { ... }
   * ```
   */
  minHold?: number;
  /**
   * `'write'` (default): today's exclusive lock, excluding every other hold of the key.
   * `'read'`: a shared hold: read holds of a key run together and exclude writers. Fair and
   * write-preferring: once a writer waits, readers that come later wait behind it; readers
   * waiting together are granted together. A reader's fence is the key's current fence (the
   * version it reads), a writer's a new, larger one. A write holder may enter a read hold of the
   * same key; a read holder asking for the write lock of the same key fails at once
   * (`LockConfigError`). Not with `segments`.
   * @default 'write'
   */
  mode?: 'read' | 'write';
  /**
   * A semaphore: at most this many holders of the key at once across every instance (each with
   * its own lease, watchdog, lost signal and a unique increasing fence; FIFO). An integer >= 1;
   * every holder of a key must use the same number (another one gets `LockConfigError` naming
   * both). `1` (default) is the exclusive lock. Not with `segments` nor `mode: 'read'`.
   * @default 1
   */
  permits?: number;
  /**
   * The lock class of the call's keys, for lock-order checking (`lockOrder`), when they are not
   * rendered from a template: `LockService.using('account:' + id, fn, { lockClass:
   * 'account:{id}' })`. One class for every key, or one per key in the order given. Without
   * it, the class of a template's key is its template (`account:{id}`: every account one class),
   * and of a raw key (or a key function's) the key itself.
   */
  lockClass?: string | readonly string[];
  /**
   * Declares that this call, nested inside a hold of its own lock class (`account:{a}` inside
   * `account:{b}`), always comes in one fixed order (ascending ids...), so lock-order checking
   * does not report the nesting. Taking both keys in one call (`['account:{a}',
   * 'account:{b}']`, sorted) needs no declaration.
   * @default false
   */
  nestedInOrder?: boolean;
}

/**
 * Options of `LockService.using` and `LockService.acquire`: those of `@Locked`, plus a signal
 * that cancels the wait.
 *
 * @example
 * ```ts
 * // Stop waiting for the lock when the client goes away.
 * const aborted = new AbortController();
 * req.on('close', () => aborted.abort());
 * await locks.using('report:7', build, { waitTimeout: 30_000, signal: aborted.signal });
 * ```
 */
export interface LockCallOptions extends LockedOptions {
  /**
   * Cancels the wait for a busy lock: once it aborts, a call still waiting stops, takes nothing
   * and rejects (at once if it is already aborted). It does not end a lock already held; that
   * lock's own `signal` reports a lost lock. `@Locked` refuses it (`LockConfigError`): a
   * decorator's options are fixed when the class is defined, not per call.
   */
  signal?: AbortSignal;
}
