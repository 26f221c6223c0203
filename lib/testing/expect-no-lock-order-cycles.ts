import type { INestApplicationContext } from '@nestjs/common';
import { LockService } from '../api/lock.service';
import { takeCycles } from '../lock-order/cycle-log';
import type { FoundCycle } from '../lock-order/lock-order-checker';
import { LOCK_ORDER_CYCLES_FOUND } from './testing.messages';

/**
 * Fails (throws an `Error` with each cycle's report) when the code a test exercised nested
 * locks in an order that can deadlock: A inside B in one path, B inside A in another (any
 * length, or a class nested in itself without `nestedInOrder`). Runs with the module's default
 * `lockOrder: 'warn'`, on `RedlockTestingModule` as on a real backend.
 *
 * Without an argument it checks what every application of this process found since the last
 * call (and starts afresh); with one, what that application's `LockService` found so far.
 *
 * @example
 * ```ts
 * afterAll(() => expectNoLockOrderCycles());
 * // or, for one app:
 * it('transfers and closes the day in one lock order', async () => {
 *   await bank.transfer('a', 'b', 10);
 *   await ledger.closeDay('2026-01-01');
 *   expectNoLockOrderCycles(moduleRef);
 * });
 * ```
 * @publicApi
 */
export function expectNoLockOrderCycles(app?: INestApplicationContext | LockService): void {
  let found: readonly FoundCycle[];
  if (app === undefined) found = takeCycles();
  else {
    const locks = app instanceof LockService ? app : app.get(LockService, { strict: false });
    found = locks.lockOrderCycles();
  }
  if (found.length > 0) throw new Error(LOCK_ORDER_CYCLES_FOUND(found.map((f) => f.report)));
}
