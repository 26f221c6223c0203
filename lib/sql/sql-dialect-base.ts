import type { SqlDialect, SqlSession } from './sql-dialect';
import {
  describeSqlError,
  isSqlConfigError,
  type SqlErrorCodes,
  type SqlTarget,
} from './sql-errors';

/** What the dialects need of a driver's pool beyond their own statements. @internal */
export interface SqlPool {
  query(sql: string): Promise<unknown>;
  end(): Promise<void>;
}

/**
 * What every SQL dialect does alike: where it connects, a ping on the pool, ending only a pool
 * it created, and the driver's errors in words. A dialect adds its statements.
 * @internal
 */
export abstract class SqlDialectBase<
  S extends SqlSession,
  P extends SqlPool,
> implements SqlDialect<S> {
  abstract readonly kind: string;
  readonly label: string;
  readonly node: string;

  constructor(
    protected readonly pool: P,
    /** Whether the backend created the pool (and ends it on close). */
    private readonly owned: boolean,
    private readonly target: SqlTarget,
    private readonly codes: SqlErrorCodes,
    /** The pool's size: every connection checked out means a checkout waits. */
    protected readonly size: number,
  ) {
    this.label = target.label;
    this.node = target.node;
  }

  abstract lockName(key: string): string;
  abstract checkout(): Promise<S>;
  abstract saturated(): boolean;
  abstract lock(
    session: S,
    names: readonly string[],
    share: Parameters<SqlDialect<S>['lock']>[2],
    waitMs: number,
    contended: boolean,
  ): Promise<number[] | undefined>;
  abstract unlock(session: S): Promise<void>;
  abstract keepAlive(session: S): Promise<void>;
  abstract isLocked(name: string): Promise<boolean>;
  abstract kill(id: number): Promise<void>;

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.owned) await this.pool.end();
  }

  describe(error: unknown): Error {
    return describeSqlError(this.target, this.codes, error);
  }

  isConfigError(error: unknown): boolean {
    return isSqlConfigError(this.codes, error);
  }
}
