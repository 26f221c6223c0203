import { Injectable, NotFoundException } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { DatabaseService } from '../database/database.service';
import { ProductsRepository, type StockView } from './products.repository';
import { SegmentedPurchase } from './segmented-purchase';

/** How `GET /products/:id` locks: shared read lock, the exclusive lock, or none. */
export const READ_LOCKS = ['read', 'write', 'none'] as const;
export type ReadLock = (typeof READ_LOCKS)[number];

/** How `POST /products/:id/restock` locks: the write lock, or none. */
export const RESTOCK_LOCKS = ['write', 'none'] as const;
export type RestockLock = (typeof RESTOCK_LOCKS)[number];

/** A product as a shopper sees it: price and stock, read as a pair. */
export interface ProductView extends StockView {
  /** Unit price, in cents. */
  readonly price: number;
  /** Version the last restock wrote with the price; equals `stockVersion` unless torn. */
  readonly priceVersion: number;
  /**
   * The price and the stock come from different restocks: this read fell between the two
   * writes of one. Never true when both sides lock.
   */
  readonly torn: boolean;
  readonly lock: ReadLock;
  /** The fence of the hold the read ran under (locked reads only). */
  readonly fence?: number;
}

export interface RestockResult {
  readonly id: number;
  readonly stock: number;
  readonly price: number;
  /** Written with both the stock and the price: the write lock's fence, when locked. */
  readonly version: number;
  readonly lock: RestockLock;
  readonly fence?: number;
}

/**
 * A product's price and stock, read and written as one pair under the product's lock
 * (`product:{id}`, the key purchases lock too).
 *
 * A restock is two writes with a database round trip between them (the stock, then the price),
 * both stamped with one version. A read is two reads with a round trip between them (the price,
 * then the stock). Readers share a read lock, so they do not wait for each other; a restock
 * takes the write lock, so no reader sees its first write without its second (`torn`).
 */
@Injectable()
export class PriceAndStock {
  constructor(
    private readonly products: ProductsRepository,
    private readonly database: DatabaseService,
    private readonly segmented: SegmentedPurchase,
  ) {}

  /**
   * @throws NotFoundException no such product (checked before any lock is taken)
   * @throws LockNotAcquiredError a restock held the product past the wait (409 + Retry-After)
   */
  async read(lock: ReadLock, id: number): Promise<ProductView> {
    if (!this.products.find(id)) throw new NotFoundException(`product ${id} does not exist`);
    switch (lock) {
      case 'read':
        return this.readShared(id);
      case 'write':
        return this.readExclusive(id);
      case 'none':
        return this.readPair(id, 'none');
    }
  }

  /** lock=read (the default): readers share the product; a restock waits for them, and they for it. */
  @Locked('product:{id}', { mode: 'read' })
  readShared(id: number): Promise<ProductView> {
    return this.readPair(id, 'read');
  }

  /** lock=write: the same read under the exclusive lock, one reader at a time (for comparison). */
  @Locked('product:{id}')
  readExclusive(id: number): Promise<ProductView> {
    return this.readPair(id, 'write');
  }

  /**
   * @throws NotFoundException no such product
   * @throws LockNotAcquiredError the product stayed busy past the wait (409 + Retry-After)
   */
  async restock(
    lock: RestockLock,
    id: number,
    stock: number,
    price: number,
  ): Promise<RestockResult> {
    if (!this.products.find(id)) throw new NotFoundException(`product ${id} does not exist`);
    return lock === 'write'
      ? this.restockLocked(id, stock, price)
      : this.writePair(id, stock, price, 'none');
  }

  /** lock=write (the default): no reader, buyer or other restock sees the product meanwhile. */
  @Locked('product:{id}', { mode: 'write' })
  restockLocked(id: number, stock: number, price: number): Promise<RestockResult> {
    return this.writePair(id, stock, price, 'write');
  }

  private async readPair(id: number, lock: ReadLock): Promise<ProductView> {
    const price = this.products.price(id);
    await this.database.roundTrip();
    const stock = this.products.view(id);
    if (!price || !stock) throw new NotFoundException(`product ${id} does not exist`);
    const fence = LockContext.current()?.fence;
    return {
      ...stock,
      ...price,
      torn: price.priceVersion !== stock.stockVersion,
      lock,
      ...(fence !== undefined ? { fence } : {}),
    };
  }

  private async writePair(
    id: number,
    stock: number,
    price: number,
    lock: RestockLock,
  ): Promise<RestockResult> {
    const fence = LockContext.current()?.fence;
    // Locked, the write lock's fence: it only grows, so versions order the restocks. Unlocked,
    // one more than the last version (two unlocked restocks can pick the same one).
    const version = fence ?? this.products.lastVersion(id) + 1;
    if (!this.products.writeStock(id, stock, version)) {
      throw new NotFoundException(`product ${id} does not exist`);
    }
    await this.database.roundTrip();
    this.products.writePrice(id, price, version);
    this.segmented.restocked(id);
    return { id, stock, price, version, lock, ...(fence !== undefined ? { fence } : {}) };
  }
}
