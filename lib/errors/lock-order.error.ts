import { LOCK_ORDER_REFUSED, SERVER_DEADLOCK } from './error.messages';
import { LockError } from './lock.error';

/**
 * One edge of a lock-order cycle: a call held a lock of class `from` when it asked for one of
 * class `to` (a class is a key template and a mode: `account:{}/exclusive`).
 */
export interface LockOrderEdge {
  readonly from: string;
  readonly to: string;
  /** Where the edge was first seen: `Class.method`, or the caller of `LockService.using`. */
  readonly site: string;
  /** The instance that first saw it (`<hostname>:<pid>`). */
  readonly instance: string;
}

/**
 * A lock order that can deadlock: with `lockOrder: 'throw'`, the acquire whose nesting would close
 * a cycle of lock classes (A inside B here, B inside A elsewhere, even in another instance) fails
 * with it before it waits, and nothing is locked. Also what a PostgreSQL (`40P01`) or MySQL
 * (`ER_LOCK_DEADLOCK`) server's own deadlock detection becomes, with the server's report
 * (`LockInterceptor` answers that one 409 `LOCK_DEADLOCK`; a `'throw'` refusal is left a 500).
 *
 * Take the locks in one order everywhere, or in one multi-key call (which takes its keys in
 * sorted order).
 *
 * @publicApi
 */
export class LockOrderError extends LockError {
  constructor(
    keys: readonly string[],
    /** The cycle, starting with the edge of the call that was refused (empty from a server). */
    readonly cycle: readonly LockOrderEdge[],
    /** The report: the cycle's edges and the "possible deadlock" table, or the server's text. */
    readonly report: string,
    /** Who saw it: `'order'` (this library's check) or `'server'` (the database's detector). */
    readonly detectedBy: 'order' | 'server' = 'order',
    cause?: unknown,
  ) {
    super(
      detectedBy === 'server' ? SERVER_DEADLOCK(keys, report) : LOCK_ORDER_REFUSED(keys, report),
      keys,
      cause,
    );
  }
}
