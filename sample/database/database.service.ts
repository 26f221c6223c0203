import * as fs from 'node:fs';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import Database from 'better-sqlite3';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { useWalMode } from './wal-mode';

/** How long an instance waits for another one's hold on the file. */
const BUSY_TIMEOUT_MS = 10_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS products (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  stock INTEGER NOT NULL,
  price INTEGER NOT NULL DEFAULT 100,
  stock_version INTEGER NOT NULL DEFAULT 0,
  price_version INTEGER NOT NULL DEFAULT 0,
  fence INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  product_id INTEGER NOT NULL,
  quantity INTEGER NOT NULL,
  mode TEXT NOT NULL,
  instance TEXT NOT NULL,
  fence INTEGER,
  created_at INTEGER NOT NULL,
  payment_state TEXT,
  payment_id TEXT,
  paid_at INTEGER
);
CREATE INDEX IF NOT EXISTS orders_by_product ON orders (product_id);
CREATE TABLE IF NOT EXISTS product_slices (
  product_id INTEGER NOT NULL,
  segment INTEGER NOT NULL,
  stock INTEGER NOT NULL,
  PRIMARY KEY (product_id, segment)
);
CREATE TABLE IF NOT EXISTS accounts (
  id TEXT PRIMARY KEY,
  balance INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transfers (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  from_id TEXT NOT NULL,
  to_id TEXT NOT NULL,
  amount INTEGER NOT NULL,
  instance TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
  id TEXT PRIMARY KEY,
  fence INTEGER NOT NULL,
  instance TEXT NOT NULL,
  progress INTEGER NOT NULL,
  status TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS report_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  report_id TEXT NOT NULL,
  fence INTEGER NOT NULL,
  instance TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  lost INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cron_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job TEXT NOT NULL,
  tick INTEGER NOT NULL,
  instance TEXT NOT NULL,
  fence INTEGER NOT NULL,
  orders INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS cron_runs_by_job ON cron_runs (job, tick);
`;

/** Columns added since the first release of the sample: a shop.sqlite from then gets them. */
const ADDED_COLUMNS: readonly { table: string; column: string; definition: string }[] = [
  { table: 'products', column: 'price', definition: 'INTEGER NOT NULL DEFAULT 100' },
  { table: 'products', column: 'stock_version', definition: 'INTEGER NOT NULL DEFAULT 0' },
  { table: 'products', column: 'price_version', definition: 'INTEGER NOT NULL DEFAULT 0' },
  { table: 'products', column: 'fence', definition: 'INTEGER NOT NULL DEFAULT 0' },
  { table: 'orders', column: 'payment_state', definition: 'TEXT' },
  { table: 'orders', column: 'payment_id', definition: 'TEXT' },
  { table: 'orders', column: 'paid_at', definition: 'INTEGER' },
];

/**
 * The SQLite file every instance of the sample shares, standing in for the shop's database.
 *
 * Each statement is atomic (WAL mode, `busy_timeout` so processes queue on the file lock instead
 * of failing), but a read followed by a write across an `await` is not: that gap, widened by
 * `roundTrip()`, is where concurrent buyers of an unlocked read-check-write oversell.
 */
@Injectable()
export class DatabaseService implements OnApplicationShutdown {
  readonly db: Database.Database;

  constructor(@Inject(SAMPLE_CONFIG) private readonly config: SampleConfig) {
    if (config.dbPath !== ':memory:') {
      fs.mkdirSync(path.dirname(config.dbPath), { recursive: true });
    }
    this.db = new Database(config.dbPath);
    // busy_timeout first: the other pragmas and the schema may meet another instance starting.
    this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    useWalMode(this.db, BUSY_TIMEOUT_MS);
    this.db.pragma('synchronous = NORMAL');
    // One instance at a time (IMMEDIATE takes the write lock first): instances starting together
    // would otherwise both see a column missing and both add it.
    this.db
      .transaction(() => {
        this.db.exec(SCHEMA);
        for (const { table, column, definition } of ADDED_COLUMNS) {
          const columns = this.db.prepare(`PRAGMA table_info(${table})`).all() as {
            name: string;
          }[];
          if (!columns.some((c) => c.name === column)) {
            this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
          }
        }
      })
      .immediate();
  }

  /**
   * The simulated network round trip of a networked database (`SAMPLE_DB_LATENCY_MS`), spent
   * between reading a value and writing what depends on it.
   */
  async roundTrip(): Promise<void> {
    if (this.config.dbLatencyMs > 0) await sleep(this.config.dbLatencyMs);
  }

  onApplicationShutdown(): void {
    if (this.db.open) this.db.close();
  }
}
