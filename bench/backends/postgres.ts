import { Pool } from 'pg';
import { postgresBackend } from 'nest-locked/postgres';
import { startPostgres } from '../../test/support/postgres-server';
import type { BenchTarget } from './bench-target';

/**
 * PostgreSQL in the backends bench: a durable cluster (fsync on, as in production) from the
 * test harness; the raw floor is the advisory lock alone on one pooled connection, the same
 * checkout and two round trips `@Locked` pays (its lock statement also draws the fence).
 */
export const target: BenchTarget = {
  name: 'postgres',
  floor: 'pg_try_advisory_lock + pg_advisory_unlock on one pooled connection',
  async start() {
    const pg = await startPostgres({ durable: true });
    return {
      definition: () => postgresBackend(pg.config),
      rawCycle: async () => {
        const pool = new Pool({ ...pg.config, max: 1 });
        return {
          cycle: async (key: string) => {
            const client = await pool.connect();
            try {
              await client.query('SELECT pg_try_advisory_lock(hashtextextended($1, 0))', [key]);
              await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
            } finally {
              client.release();
            }
          },
          close: () => pool.end(),
        };
      },
      stop: () => pg.stop(),
    };
  },
};
