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
}
