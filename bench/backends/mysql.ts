import { createPool } from 'mysql2/promise';
import { mysqlBackend } from 'nest-locked/mysql';
import { startMariadb } from '../../test/support/mariadb-server';
import type { BenchTarget } from './bench-target';

/**
 * MySQL (MariaDB 10.11 here) in the backends bench: a server from the test harness; the raw
 * floor is the named lock alone on one pooled connection, the same checkout and two round trips
 * `@Locked` pays (its lock statement also draws the fence).
 */
export const target: BenchTarget = {
  name: 'mysql',
  floor: 'GET_LOCK(name, 0) + RELEASE_LOCK(name) on one pooled connection',
  async start() {
    const db = await startMariadb();
    return {
      definition: () => mysqlBackend(db.config),
      rawCycle: async () => {
        const pool = createPool({ ...db.config, connectionLimit: 1 });
        return {
          cycle: async (key: string) => {
            const connection = await pool.getConnection();
            try {
              await connection.query('SELECT GET_LOCK(?, 0)', [key]);
              await connection.query('SELECT RELEASE_LOCK(?)', [key]);
            } finally {
              connection.release();
            }
          },
          close: () => pool.end(),
        };
      },
      stop: () => db.stop(),
    };
  },
};
