import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { DatabaseService } from '../database/database.service';
import { ChaosHook } from './chaos-hook';
import { InsufficientStockException } from './insufficient-stock.exception';
import { ProductsRepository, type Sale } from './products.repository';
import { SegmentedPurchase } from './segmented-purchase';
import { StaleFenceException } from './stale-fence.exception';

export const PURCHASE_MODES = ['none', 'product', 'segmented', 'fenced'] as const;
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
 * read-check-write; only the lock around it differs (none, one per product, or sliced), and
 * mode=fenced adds a fenced write to the product lock.
 */
@Injectable()
export class PurchaseService {
  constructor(
    private readonly products: ProductsRepository,
    private readonly database: DatabaseService,
    private readonly segmented: SegmentedPurchase,
    private readonly chaos: ChaosHook,
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
      case 'fenced':
        return this.buyFenced(id, quantity);
    }
  }

  /**
   * mode=none, the classic oversell: read the stock, check it, decrement it. Two buyers that
   * read before either writes both sell, on one instance or on several.
   */
  buyUnlocked(id: number, quantity: number): Promise<PurchaseResult> {
    return this.checkThenSell(id, quantity, 'none');
  }

  /**
   * mode=product: the same code, one buyer at a time per product across every instance; it
   * writes the stock it computed (read, subtract, save), as most code does.
   */
  @Locked('product:{id}')
  buyLocked(id: number, quantity: number): Promise<PurchaseResult> {
    return this.checkThenSell(id, quantity, 'product');
  }

  /**
   * mode=fenced: mode=product whose write carries the lock's fence
   * (`ProductsRepository.writeStockFenced`). A buyer whose lock was taken over between its read
   * and its write (a pause past its lease, Redis restarted) sells nothing, 409 `STALE_FENCE`,
   * instead of writing a stale stock over the sales of the holders after it. It does not check
   * `signal.aborted` first: a pause can come right after such a check, the database's check
   * cannot be outrun.
   */
  @Locked('product:{id}')
  buyFenced(id: number, quantity: number): Promise<PurchaseResult> {
    return this.checkThenSell(id, quantity, 'fenced');
  }

  private async checkThenSell(
    id: number,
    quantity: number,
    mode: PurchaseMode,
  ): Promise<PurchaseResult> {
    if (mode !== 'none') await this.chaos.holding(id);
    const product = this.products.find(id);
    if (!product) throw new NotFoundException(`product ${id} does not exist`);
    if (mode !== 'none') await this.chaos.stockRead(id, product.stock);
    await this.database.roundTrip();
    if (product.stock < quantity) {
      throw new InsufficientStockException(id, Math.max(0, product.stock), quantity);
    }
    const fence = LockContext.current()?.fence;
    const sale = this.write(id, product.stock - quantity, quantity, mode, fence);
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

  /** Each mode's write of the sale: `stock` is what is left after it, as computed from the read. */
  private write(
    id: number,
    stock: number,
    quantity: number,
    mode: PurchaseMode,
    fence: number | undefined,
  ): Sale {
    const record = { mode, instance: this.config.instance, fence };
    if (mode === 'none') return this.products.sell(id, quantity, record);
    if (mode !== 'fenced') return this.products.sellAt(id, stock, quantity, record);
    // A locked call always has its lock's fence (LockContext).
    const sale = this.products.sellFenced(id, stock, quantity, { ...record, fence: fence! });
    if (!sale) throw new StaleFenceException(id, fence!);
    return sale;
  }
}
