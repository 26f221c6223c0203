import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { DatabaseService } from '../database/database.service';
import { InsufficientStockException } from './insufficient-stock.exception';
import { ProductsRepository } from './products.repository';
import { SegmentedPurchase } from './segmented-purchase';

export const PURCHASE_MODES = ['none', 'product', 'segmented'] as const;
export type PurchaseMode = (typeof PURCHASE_MODES)[number];

export interface PurchaseResult {
  readonly orderId: number;
  readonly productId: number;
  readonly quantity: number;
  /** Stock left right after this sale (below zero means the shop oversold). */
  readonly remaining: number;
  readonly mode: PurchaseMode;
  readonly instance: string;
  /** Fencing token of the lock the sale ran under (locked modes only). */
  readonly fence?: number;
}

/**
 * A flash sale: many buyers of one product at once, across instances. Every mode runs the same
 * read-check-write; only the lock around it differs (none, one per product, or sliced).
 */
@Injectable()
export class PurchaseService {
  constructor(
    private readonly products: ProductsRepository,
    private readonly database: DatabaseService,
    private readonly segmented: SegmentedPurchase,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
  ) {}

  /**
   * @throws NotFoundException no such product (checked before any lock is taken)
   * @throws InsufficientStockException 409 with the stock left
   * @throws LockNotAcquiredError the product stayed busy past the wait (409 + Retry-After)
   */
  async purchase(mode: PurchaseMode, id: number, quantity: number): Promise<PurchaseResult> {
    if (!this.products.find(id)) throw new NotFoundException(`product ${id} does not exist`);
    switch (mode) {
      case 'none':
        return this.buyUnlocked(id, quantity);
      case 'product':
        return this.buyLocked(id, quantity);
      case 'segmented':
        return this.segmented.buy(id, quantity);
    }
  }

  /**
   * mode=none, the classic oversell: read the stock, check it, write. Two buyers that read
   * before either writes both sell, on one instance or on several.
   */
  buyUnlocked(id: number, quantity: number): Promise<PurchaseResult> {
    return this.checkThenSell(id, quantity, 'none');
  }

  /** mode=product: the same code, one buyer at a time per product across every instance. */
  @Locked('product:{id}')
  buyLocked(id: number, quantity: number): Promise<PurchaseResult> {
    return this.checkThenSell(id, quantity, 'product');
  }

  private async checkThenSell(
    id: number,
    quantity: number,
    mode: PurchaseMode,
  ): Promise<PurchaseResult> {
    const product = this.products.find(id);
    if (!product) throw new NotFoundException(`product ${id} does not exist`);
    await this.database.roundTrip();
    if (product.stock < quantity) {
      throw new InsufficientStockException(id, Math.max(0, product.stock), quantity);
    }
    const fence = LockContext.current()?.fence;
    const sale = this.products.sell(id, quantity, { mode, instance: this.config.instance, fence });
    return {
      orderId: sale.orderId,
      productId: id,
      quantity,
      remaining: sale.remaining,
      mode,
      instance: this.config.instance,
      ...(fence !== undefined ? { fence } : {}),
    };
  }
}
