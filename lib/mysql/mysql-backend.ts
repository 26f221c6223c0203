import { randomBytes } from 'node:crypto';
import type { Pool, PoolOptions } from 'mysql2/promise';
import type { LockBackendDefinition } from '../core/lock-backend-definition';
import { sqlBackendDefinition } from '../sql/sql-lock-backend';
import { choosePool, loadDriver } from '../sql/sql-pool-options';
import { sqlTarget } from '../sql/sql-target';
import { MYSQL_ERROR_CODES, MysqlDialect } from './mysql-dialect';

/** Connections of the lock's own pool unless `connectionLimit` says otherwise. */
export const MYSQL_DEFAULT_POOL_SIZE = 10;

/**
 * Options of {@link mysqlBackend}: a mysql2 promise `Pool` of your own (`pool`), or the settings
 * of the lock's own pool (any mysql2 `PoolOptions`: `uri`, `host`, `user`, `password`...).
 */
export interface MysqlBackendOptions extends PoolOptions {
  /**
   * A mysql2 promise `Pool` (`mysql2/promise` `createPool`) of the application's, used instead
   * of a pool of the lock's own. nest-locked never ends it. Each hold and each wait keeps one
   * of its connections checked out.
   */
  pool?: Pool;
  /**
   * The lock's own pool: connections at most. Each hold and each wait of this process keeps one
   * checked out (the lock lives in its session).
   * @default 10
   */
  connectionLimit?: number;
}

const isPool = (value: unknown): value is Pool =>
  typeof (value as Pool | null)?.getConnection === 'function' &&
  typeof (value as Pool | null)?.query === 'function';

/**
 * A lock group on MySQL 8 or MariaDB 10.6+ (peer dependency: `mysql2`): `GET_LOCK` named locks
 * on a connection held for the hold, waiting in the server's own queue, fences from
 * `UUID_SHORT()` in the lock's own round trip. Exclusive locks only: `mode: 'read'` and
 * `permits` are refused at startup. See docs/backends/mysql.md.
 *
 * @example
 * ```ts
 * import { RedlockModule } from 'nest-locked';
 * import { mysqlBackend } from 'nest-locked/mysql';
 *
 * RedlockModule.forRoot({
 *   backend: mysqlBackend({ uri: process.env.MYSQL_URL }),
 * });
 * ```
 * @throws LockConfigError `pool` together with connection settings, a bad `connectionLimit`, or
 *   `mysql2` not installed
 */
export function mysqlBackend(options: MysqlBackendOptions = {}): LockBackendDefinition {
  const factory = 'mysqlBackend';
  const mysql = loadDriver<typeof import('mysql2/promise')>(factory, 'mysql2/promise');
  const { pool, config } = choosePool(
    factory,
    options,
    'connectionLimit',
    isPool,
    'a mysql2 promise Pool (mysql2/promise createPool)',
  );
  const supports = { read: false, permits: false } as const;
  return sqlBackendDefinition('mysql', supports, ({ commandTimeout }) => {
    const settings = {
      connectionLimit: MYSQL_DEFAULT_POOL_SIZE,
      connectTimeout: commandTimeout,
      // The OS notices a dead server or network between keep-alives.
      enableKeepAlive: true,
      // mysql2 captures a stack trace per query otherwise, the largest client cost of a lock
      // cycle; the backend words every driver error itself (`describe`).
      trace: false,
      // Names this process's connections (performance_schema.session_connect_attrs): the lock
      // board tells who holds and waits.
      connectAttributes: { program_name: `nest-locked:${randomBytes(4).toString('hex')}` },
      ...(config as PoolOptions),
    };
    const lockPool = pool ?? mysql.createPool(settings);
    const given = pool && poolSettings(pool);
    const target = sqlTarget(
      'MySQL',
      { ...(given ?? settings), url: settings.uri },
      { host: 'localhost', port: 3306, user: '', database: '' },
    );
    const size = given
      ? (given.connectionLimit ?? MYSQL_DEFAULT_POOL_SIZE)
      : settings.connectionLimit;
    return new MysqlDialect(lockPool, !pool, target, MYSQL_ERROR_CODES, size);
  });
}

/** A mysql2 pool's settings (its core pool's config), for messages: never the password. */
function poolSettings(pool: Pool): PoolOptions {
  const core = (
    pool as Pool & {
      pool?: { config?: { connectionConfig?: PoolOptions; connectionLimit?: number } };
    }
  ).pool;
  return { ...core?.config?.connectionConfig, connectionLimit: core?.config?.connectionLimit };
}
