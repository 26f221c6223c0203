import Database from 'better-sqlite3';

/**
 * The chaos demo's view of the shop's database (the instances' SQLite file, read-only): the
 * sales newer holders made, and the count at the end of a row.
 */
export class ShopLedger {
  private readonly db: Database.Database;
  private readonly newerCount: Database.Statement<[number, number], { n: number }>;
  private readonly stockAndSold: Database.Statement<[number], { stock: number; sold: number }>;
  private readonly fencesInOrder: Database.Statement<[number], { fence: number }>;

  constructor(dbPath: string) {
    this.db = new Database(dbPath, { readonly: true, fileMustExist: true });
    this.db.pragma('busy_timeout = 10000');
    this.newerCount = this.db.prepare(
      'SELECT COUNT(*) AS n FROM orders WHERE product_id = ? AND fence > ?',
    );
    this.stockAndSold = this.db.prepare(
      `SELECT p.stock, COALESCE(SUM(o.quantity), 0) AS sold
         FROM products p LEFT JOIN orders o ON o.product_id = p.id
        WHERE p.id = ? GROUP BY p.id`,
    );
    this.fencesInOrder = this.db.prepare(
      'SELECT fence FROM orders WHERE product_id = ? ORDER BY id',
    );
  }

  /** Orders of the product written under a fence above `fence`. */
  salesAfter(productId: number, fence: number): number {
    return this.newerCount.get(productId, fence)?.n ?? 0;
  }

  /**
   * The product's stock and units sold, and its stale writes: orders written with an older
   * fence than an order written before them (a holder that wrote after losing its lock).
   */
  tally(productId: number): { finalStock: number; sold: number; staleApplied: number } {
    const { stock, sold } = this.stockAndSold.get(productId) ?? { stock: 0, sold: 0 };
    let newest = -Infinity;
    let staleApplied = 0;
    for (const { fence } of this.fencesInOrder.all(productId)) {
      if (fence < newest) staleApplied++;
      newest = Math.max(newest, fence);
    }
    return { finalStock: stock, sold, staleApplied };
  }

  close(): void {
    this.db.close();
  }
}
