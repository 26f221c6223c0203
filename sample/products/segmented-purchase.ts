import { Inject, Injectable } from '@nestjs/common';
import {
  AllSegmentsExhaustedError,
  LockContext,
  Locked,
  LockService,
  SegmentExhaustedError,
} from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { DatabaseService } from '../database/database.service';
import { InsufficientStockException } from './insufficient-stock.exception';
import { ProductsRepository, SLICES } from './products.repository';
import type { PurchaseResult } from './purchase.service';

/** The lock keys of every slice of a product, as the segmented strategy names them. */
const allSlices = (id: number, _quantity: number): string[] =>
  Array.from({ length: SLICES }, (_, s) => `stock:${id}:seg:${s}`);

/**
 * mode=segmented, sliced locks instead of one per-product lock: a product's stock is split into
 * `SLICES` slices, each behind its own lock, so up to `SLICES` buyers sell at once where
 * mode=product lets one through.
 *
 * A product must be sold through one mode at a time: the slice locks and the product lock do
 * not exclude each other (mode=none shows what that means).
 */
@Injectable()
export class SegmentedPurchase {
  constructor(
    private readonly products: ProductsRepository,
    private readonly database: DatabaseService,
    private readonly locks: LockService,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
  ) {}

  /**
   * @throws InsufficientStockException 409 when the whole product cannot cover the quantity
   * @throws LockNotAcquiredError every slice stayed busy past the wait (409 + Retry-After)
   */
  async buy(id: number, quantity: number): Promise<PurchaseResult> {
    try {
      return await this.buyFromSlice(id, quantity);
    } catch (err) {
      if (!(err instanceof AllSegmentsExhaustedError)) throw err;
    }
    // No single slice can serve. Usually the sale is over; then the product's stock says so
    // without a lock (between restocks it only goes down, so "too little" stays true).
    const stock = this.products.find(id)?.stock ?? 0;
    if (stock < quantity) throw new InsufficientStockException(id, Math.max(0, stock), quantity);
    return this.buyAcrossSlices(id, quantity);
  }

  /**
   * One slice, whichever is free: read it, check it, write it. A slice that cannot cover the
   * quantity throws `SegmentExhaustedError` and the library tries the next one.
   */
  @Locked('stock:{id}', { segments: SLICES })
  async buyFromSlice(id: number, quantity: number): Promise<PurchaseResult> {
    const { segment, fence } = LockContext.current()!;
    const left = this.products.sliceStock(id, segment!);
    await this.database.roundTrip();
    if (left < quantity) {
      throw new SegmentExhaustedError(`slice ${segment} of product ${id} has ${left} left`);
    }
    const sale = this.products.sellFromSlice(id, segment!, quantity, this.sale(fence));
    return this.result(id, quantity, sale, fence);
  }

  /**
   * The quantity is larger than any one slice's remainder but the product has it: lock every
   * slice (all or nothing, sorted, so this cannot deadlock with single-slice buyers) and take it
   * from several.
   */
  @Locked(allSlices)
  async buyAcrossSlices(id: number, quantity: number): Promise<PurchaseResult> {
    const { fence } = LockContext.current()!;
    const total = this.products.slices(id).reduce((a, b) => a + b, 0);
    await this.database.roundTrip();
    if (total < quantity) throw new InsufficientStockException(id, Math.max(0, total), quantity);
    const sale = this.products.sell(id, quantity, this.sale(fence));
    return this.result(id, quantity, sale, fence);
  }

  /** After a restock: use every slice again at once (other instances do within 1 s). */
  restocked(id: number): void {
    this.locks.resetSegments(`stock:${id}`);
  }

  private sale(fence: number) {
    return { mode: 'segmented', instance: this.config.instance, fence };
  }

  private result(
    id: number,
    quantity: number,
    sale: { orderId: number; remaining: number },
    fence: number,
  ): PurchaseResult {
    return {
      orderId: sale.orderId,
      productId: id,
      quantity,
      remaining: sale.remaining,
      mode: 'segmented',
      instance: this.config.instance,
      fence,
    };
  }
}
