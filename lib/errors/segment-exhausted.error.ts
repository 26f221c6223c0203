import { LockError } from './lock.error';

/**
 * Thrown by a method running under a segmented lock (`segments: N`) when the slice it holds
 * cannot serve the call (its stock is gone). The library releases the slice, remembers it as
 * exhausted for a short time and tries another slice.
 *
 * @example
 * ```ts
 * @Locked('stock:{sku}', { segments: 10 })
 * async buy(sku: string, qty: number) {
 *   const { segment } = LockContext.current()!;
 *   if ((await this.stock.slice(sku, segment!)) < qty) throw new SegmentExhaustedError();
 *   ...
 * }
 * ```
 * @publicApi
 */
export class SegmentExhaustedError extends LockError {
  constructor(message = 'This segment cannot serve the call', cause?: unknown) {
    super(message, [], cause);
  }
}
