import { Injectable } from '@nestjs/common';
import type { Statement } from 'better-sqlite3';
import { DatabaseService } from '../database/database.service';

/** How many slices a product's stock is split into, for mode=segmented. */
export const SLICES = 10;

export interface Product {
  readonly id: number;
  readonly name: string;
  /** The product's stock: always the sum of its slices while no sale oversold it. */
  readonly stock: number;
  /** Unit price, in cents. */
  readonly price: number;
}

/** A product with what it sold so far (from the orders, not from its stock column). */
export interface StockView extends Omit<Product, 'price'> {
  /** Units sold: the sum of the quantities of its orders. */
  readonly sold: number;
  readonly orders: number;
  /** Stock of each slice (mode=segmented sells from one slice at a time). */
  readonly slices: number[];
  /** Version the last restock wrote with the stock (the price carries the same one). */
  readonly stockVersion: number;
}

/** The price and the version the last restock wrote with it. */
export interface PriceRow {
  readonly price: number;
  readonly priceVersion: number;
}

export interface Sale {
  readonly orderId: number;
  /** The product's stock after this sale, as the database has it now. */
  readonly remaining: number;
}

interface SaleRecord {
  readonly mode: string;
  readonly instance: string;
  readonly fence?: number;
}

/** A sale written under a lock, with the fence of that lock. */
interface FencedSale extends SaleRecord {
  readonly fence: number;
}

/** Splits `stock` into `SLICES` near-equal parts (the first ones take the remainder). */
const split = (stock: number): number[] =>
  Array.from(
    { length: SLICES },
    (_, s) => Math.floor(stock / SLICES) + (s < stock % SLICES ? 1 : 0),
  );

/**
 * Products, their stock slices and orders in the shared SQLite file. Every method is one atomic
 * statement or transaction; none checks stock: that is the callers' read-check-write, which only
 * a lock makes safe.
 */
@Injectable()
export class ProductsRepository {
  private readonly byId: Statement<[number], Product>;
  private readonly viewById: Statement<[number], Omit<StockView, 'slices'>>;
  private readonly priceById: Statement<[number], PriceRow>;
  private readonly versionById: Statement<[number], { version: number }>;
  private readonly insert: Statement<[string, number, number, number]>;
  private readonly setStock: Statement<[number, number, number]>;
  private readonly setVersionedStock: Statement<[number, number, number, number]>;
  private readonly setVersionedPrice: Statement<[number, number, number, number]>;
  private readonly setFencedStock: Statement<[number, number, number, number, number]>;
  private readonly decrement: Statement<[number, number, number]>;
  private readonly insertOrder: Statement<[number, number, string, string, number | null, number]>;
  private readonly slicesOf: Statement<[number], { segment: number; stock: number }>;
  private readonly sliceOf: Statement<[number, number], { stock: number }>;
  private readonly putSlice: Statement<[number, number, number]>;
  private readonly takeFromSlice: Statement<[number, number, number]>;
  private readonly createTx: (name: string, stock: number, price: number) => number;
  private readonly restockTx: (id: number, stock: number) => boolean;
  private readonly versionedStockTx: (id: number, stock: number, version: number) => boolean;
  private readonly sellTx: (
    id: number,
    quantity: number,
    sale: SaleRecord,
    writeStock: () => boolean,
  ) => Sale | undefined;
  private readonly sellSliceTx: (
    id: number,
    segment: number,
    quantity: number,
    sale: SaleRecord,
  ) => Sale;

  constructor(database: DatabaseService) {
    const { db } = database;
    this.byId = db.prepare('SELECT id, name, stock, price FROM products WHERE id = ?');
    this.viewById = db.prepare(
      `SELECT p.id, p.name, p.stock,
              COALESCE(SUM(o.quantity), 0) AS sold, COUNT(o.id) AS orders,
              p.stock_version AS stockVersion
         FROM products p LEFT JOIN orders o ON o.product_id = p.id
        WHERE p.id = ? GROUP BY p.id`,
    );
    this.priceById = db.prepare(
      'SELECT price, price_version AS priceVersion FROM products WHERE id = ?',
    );
    this.versionById = db.prepare(
      'SELECT MAX(stock_version, price_version) AS version FROM products WHERE id = ?',
    );
    this.insert = db.prepare(
      'INSERT INTO products (name, stock, price, updated_at) VALUES (?, ?, ?, ?)',
    );
    this.setStock = db.prepare('UPDATE products SET stock = ?, updated_at = ? WHERE id = ?');
    this.setVersionedStock = db.prepare(
      'UPDATE products SET stock = ?, stock_version = ?, updated_at = ? WHERE id = ?',
    );
    this.setVersionedPrice = db.prepare(
      'UPDATE products SET price = ?, price_version = ?, updated_at = ? WHERE id = ?',
    );
    // The fence only grows: a write carrying an older one comes from a holder whose lock was
    // taken over since, and is refused (see writeStockFenced).
    this.setFencedStock = db.prepare(
      'UPDATE products SET stock = ?, fence = ?, updated_at = ? WHERE id = ? AND fence < ?',
    );
    // Relative decrement (stock = stock - ?): the statement itself is atomic, so an unlocked
    // race shows as stock below zero rather than as a lost update.
    this.decrement = db.prepare(
      'UPDATE products SET stock = stock - ?, updated_at = ? WHERE id = ?',
    );
    this.insertOrder = db.prepare(
      `INSERT INTO orders (product_id, quantity, mode, instance, fence, created_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.slicesOf = db.prepare(
      'SELECT segment, stock FROM product_slices WHERE product_id = ? ORDER BY segment',
    );
    this.sliceOf = db.prepare(
      'SELECT stock FROM product_slices WHERE product_id = ? AND segment = ?',
    );
    this.putSlice = db.prepare(
      `INSERT INTO product_slices (product_id, segment, stock) VALUES (?, ?, ?)
       ON CONFLICT (product_id, segment) DO UPDATE SET stock = excluded.stock`,
    );
    this.takeFromSlice = db.prepare(
      'UPDATE product_slices SET stock = stock - ? WHERE product_id = ? AND segment = ?',
    );

    const putSlices = (id: number, stock: number) =>
      split(stock).forEach((s, segment) => this.putSlice.run(id, segment, s));
    const order = (id: number, quantity: number, sale: SaleRecord, now: number): Sale => {
      const row = this.insertOrder.run(
        id,
        quantity,
        sale.mode,
        sale.instance,
        sale.fence ?? null,
        now,
      );
      return { orderId: Number(row.lastInsertRowid), remaining: this.byId.get(id)!.stock };
    };
    this.createTx = db.transaction((name: string, stock: number, price: number) => {
      const id = Number(this.insert.run(name, stock, price, Date.now()).lastInsertRowid);
      putSlices(id, stock);
      return id;
    });
    this.restockTx = db.transaction((id: number, stock: number) => {
      if (this.setStock.run(stock, Date.now(), id).changes === 0) return false;
      putSlices(id, stock);
      return true;
    });
    this.versionedStockTx = db.transaction((id: number, stock: number, version: number) => {
      if (this.setVersionedStock.run(stock, version, Date.now(), id).changes === 0) return false;
      putSlices(id, stock);
      return true;
    });
    // The product's stock (as `writeStock` writes it; nothing at all when it refuses), then the
    // slices from the first one on, so they keep adding up, and the order.
    this.sellTx = db.transaction(
      (id: number, quantity: number, sale: SaleRecord, writeStock: () => boolean) => {
        if (!writeStock()) return undefined;
        let left = quantity;
        for (const slice of this.slicesOf.all(id)) {
          const take = Math.min(left, Math.max(0, slice.stock));
          if (take > 0) this.takeFromSlice.run(take, id, slice.segment);
          left -= take;
          if (left === 0) break;
        }
        return order(id, quantity, sale, Date.now());
      },
    );
    this.sellSliceTx = db.transaction(
      (id: number, segment: number, quantity: number, sale: SaleRecord) => {
        const now = Date.now();
        this.takeFromSlice.run(quantity, id, segment);
        this.decrement.run(quantity, now, id);
        return order(id, quantity, sale, now);
      },
    );
  }

  find(id: number): Product | undefined {
    return this.byId.get(id);
  }

  /** Stock, sales and slices, as of one statement (the price is read on its own: `price`). */
  view(id: number): StockView | undefined {
    const product = this.viewById.get(id);
    return product && { ...product, slices: this.slices(id) };
  }

  price(id: number): PriceRow | undefined {
    return this.priceById.get(id);
  }

  /** The larger of the stock's and the price's version (0 before any restock). */
  lastVersion(id: number): number {
    return this.versionById.get(id)?.version ?? 0;
  }

  /** Creates a product, its stock split into `SLICES` slices. */
  create(name: string, stock: number, price: number): Product {
    return this.find(this.createTx(name, stock, price))!;
  }

  /**
   * The first half of a restock: the stock (and its slices) with the restock's version. `false`
   * if there is no such product.
   */
  writeStock(id: number, stock: number, version: number): boolean {
    return this.versionedStockTx(id, stock, version);
  }

  /** The second half of a restock: the price with the same version as the stock. */
  writePrice(id: number, price: number, version: number): boolean {
    return this.setVersionedPrice.run(price, version, Date.now(), id).changes > 0;
  }

  /** Sets the stock (and re-splits the slices); `undefined` if there is no such product. */
  restock(id: number, stock: number): Product | undefined {
    return this.restockTx(id, stock) ? this.find(id) : undefined;
  }

  /** Stock of every slice, by segment. */
  slices(id: number): number[] {
    return this.slicesOf.all(id).map((s) => s.stock);
  }

  /** Stock of one slice (0 for a product that has none). */
  sliceStock(id: number, segment: number): number {
    return this.sliceOf.get(id, segment)?.stock ?? 0;
  }

  /**
   * Takes `quantity` off the product as one statement (`stock = stock - ?`), and off its slices,
   * first ones first, and records the order.
   */
  sell(id: number, quantity: number, sale: SaleRecord): Sale {
    return this.sellTx(
      id,
      quantity,
      sale,
      () => this.decrement.run(quantity, Date.now(), id).changes > 0,
    )!;
  }

  /**
   * Sets the product's stock to `stock`, what the caller computed from the stock it read, takes
   * `quantity` off the slices and records the order: the read-modify-write most code does (load,
   * change, save). Safe only while nobody else writes in between, which the lock is for.
   */
  sellAt(id: number, stock: number, quantity: number, sale: SaleRecord): Sale {
    return this.sellTx(
      id,
      quantity,
      sale,
      () => this.setStock.run(stock, Date.now(), id).changes > 0,
    )!;
  }

  /**
   * `sellAt` with a fenced write (`writeStockFenced`): `undefined`, and nothing written, when a
   * holder with a newer fence of the product's lock wrote the stock first.
   */
  sellFenced(id: number, stock: number, quantity: number, sale: FencedSale): Sale | undefined {
    return this.sellTx(id, quantity, sale, () => this.writeStockFenced(id, stock, sale.fence));
  }

  /**
   * The fenced write: the stock is written only if no holder with a newer fence of the product's
   * lock wrote it since.
   *
   * Why: a lock can be lost while its holder still runs. A pause longer than the lease (GC, a
   * stopped VM) or Redis restarted without persistence hands the lock to the next caller while
   * the first one is between its read and its write; when it wakes up, it writes a stock computed
   * from what it read before the next holder sold, and undoes those sales. Its lock cannot stop
   * that write: it no longer has one. The database can, since it sees both writes: fences
   * strictly increase per key across every holder, so the older fence loses
   * (`UPDATE ... SET stock = ?, fence = ? WHERE id = ? AND fence < ?`).
   *
   * @returns `false` when refused (a newer fence wrote first) or the product does not exist
   */
  writeStockFenced(id: number, stock: number, fence: number): boolean {
    return this.setFencedStock.run(stock, fence, Date.now(), id, fence).changes > 0;
  }

  /** Takes `quantity` off one slice and off the product, and records the order. */
  sellFromSlice(id: number, segment: number, quantity: number, sale: SaleRecord): Sale {
    return this.sellSliceTx(id, segment, quantity, sale);
  }
}
