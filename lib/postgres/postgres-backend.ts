import { randomBytes } from 'node:crypto';
import type { Pool, PoolConfig } from 'pg';
import type { LockBackendDefinition } from '../core/lock-backend-definition';
import { sqlBackendDefinition } from '../sql/sql-lock-backend';
import { choosePool, loadDriver } from '../sql/sql-pool-options';
import { sqlTarget } from '../sql/sql-target';
import { PostgresDialect } from './postgres-dialect';

/** How long pg's pool may keep a caller queued or a connect pending (see `create`). */
const POOL_QUEUE_TIMEOUT_MS = 30_000;

/** Connections of the lock's own pool unless `max` says otherwise. */
export const POSTGRES_DEFAULT_POOL_SIZE = 10;

/**
 * Options of {@link postgresBackend}: a pg `Pool` of your own (`pool`), or the settings of the
 * lock's own pool (any pg `PoolConfig`: `connectionString`, `host`, `user`, `password`, `ssl`...).
 */
export interface PostgresBackendOptions extends PoolConfig {
  /**
   * A pg `Pool` of the application's, used instead of a pool of the lock's own. nest-locked never
   * ends it. Each hold and each wait keeps one of its connections checked out, so size it for
   * your queries plus your concurrent locks.
   */
  pool?: Pool;
  /**
   * The lock's own pool: connections at most. Each hold and each wait of this process keeps one
   * checked out (the lock lives in its session); callers beyond it wait for a free connection
   * within their `waitTimeout`.
   * @default 10
   */
  max?: number;
}

const isPool = (value: unknown): value is Pool =>
  typeof (value as Pool | null)?.connect === 'function' &&
  typeof (value as Pool | null)?.query === 'function';

/**
 * A lock group on PostgreSQL (peer dependency: `pg`): session advisory locks on a connection held
 * for the hold, waiting in PostgreSQL's own lock queue, fences from the server's clock in the lock's
 * own round trip, read locks (`pg_advisory_lock_shared`), permits (N advisory locks per key). See docs/backends/postgres.md.
 *
 * @example
 * ```ts
 * import { RedlockModule } from 'nest-locked';
 * import { postgresBackend } from 'nest-locked/postgres';
 *
 * RedlockModule.forRoot({
 *   backend: postgresBackend({ connectionString: process.env.DATABASE_URL }),
 * });
 * // or a pool of your own (never closed by nest-locked):
 * RedlockModule.forRoot({ backend: postgresBackend({ pool }) });
 * ```
 * @throws LockConfigError `pool` together with connection settings, a bad `max`, or `pg` not
 *   installed
 */
export function postgresBackend(options: PostgresBackendOptions = {}): LockBackendDefinition {
  const factory = 'postgresBackend';
  const pg = loadDriver<typeof import('pg')>(factory, 'pg');
  const { pool, config } = choosePool(factory, options, 'max', isPool, 'a pg Pool');
  const supports = { read: true, permits: true } as const;
  return sqlBackendDefinition('postgres', supports, ({ group, commandTimeout, logger }) => {
    const own = !pool;
    const lockPool =
      pool ??
      new pg.Pool({
        max: POSTGRES_DEFAULT_POOL_SIZE,
        // Names this process's lock sessions on the server: the board tells who holds what.
        application_name: `nest-locked:${randomBytes(4).toString('hex')}`,
        // The OS notices a dead server or network between keep-alives.
        keepAlive: true,
        // pg's pool applies this to a caller queued for a free connection too: long enough
        // that a waiter keeps its place in the queue (every call is bounded by its own wait).
        connectionTimeoutMillis: Math.max(commandTimeout, POOL_QUEUE_TIMEOUT_MS),
        ...(config as PoolConfig),
      });
    // An idle connection of our own pool that fails is dropped by pg; without a listener
    // its error would end the process.
    if (own)
      lockPool.on('error', (err) => logger.debug?.(`postgres pool (${group}): ${err.message}`));
    const settings = { ...lockPool.options, ...config } as PoolConfig;
    const target = sqlTarget(
      'PostgreSQL',
      { ...settings, url: settings.connectionString },
      {
        host: String(pg.defaults.host ?? 'localhost'),
        port: Number(pg.defaults.port ?? 5432),
        user: String(pg.defaults.user ?? process.env.USER ?? ''),
        database: String(pg.defaults.database ?? pg.defaults.user ?? ''),
      },
    );
    const size = lockPool.options.max ?? POSTGRES_DEFAULT_POOL_SIZE;
    return new PostgresDialect(lockPool, own, target, size);
  });
}
