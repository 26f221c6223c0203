import { createPool, type RowDataPacket } from 'mysql2/promise';
import { mysqlBackend } from 'nest-locked/mysql';
import { describeSqlBackend } from '../../support/sql-backend-suite';
import { type MariadbServerHandle, startMariadb } from '../../support/mariadb-server';

describe('mysqlBackend (real MariaDB)', () => {
  describeSqlBackend<MariadbServerHandle>({
    name: 'mysql',
    start: () => startMariadb(),
    stop: (db) => db.stop(),
    definition: (db, overrides = {}) => mysqlBackend({ ...db.config, ...overrides }),
    userPool: (db) => {
      const pool = createPool({ ...db.config, connectionLimit: 2 });
      return {
        pool,
        definition: mysqlBackend({ pool }),
        stillWorks: async () =>
          (await pool.query<RowDataPacket[]>('SELECT 1 AS one'))[0][0].one === 1,
        end: () => pool.end(),
      };
    },
    killHolder: async (db, name) => {
      const [{ holder }] = await db.sql<{ holder: number | null }>(
        'SELECT IS_USED_LOCK(?) AS holder',
        [name],
      );
      if (holder === null) throw new Error(`nobody holds ${name}`);
      await db.sql(`KILL ${holder}`);
    },
    waiting: async (db) => {
      const [{ n }] = await db.sql<{ n: number }>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT IF(GET_LOCK%' AND STATE LIKE '%lock%'`,
      );
      return Number(n);
    },
    wrongPassword: { password: 'wrong' },
    unknownDatabase: { database: 'nope' },
  });
});
