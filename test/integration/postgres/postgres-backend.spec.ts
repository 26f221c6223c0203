import { Pool } from 'pg';
import { postgresBackend } from 'nest-locked/postgres';
import { describeSqlBackend } from '../../support/sql-backend-suite';
import { type PostgresServerHandle, startPostgres } from '../../support/postgres-server';

describe('postgresBackend (real PostgreSQL)', () => {
  describeSqlBackend<PostgresServerHandle>({
    name: 'postgres',
    start: () => startPostgres(),
    stop: (pg) => pg.stop(),
    definition: (pg, overrides = {}) => postgresBackend({ ...pg.config, ...overrides }),
    userPool: (pg) => {
      const pool = new Pool({ ...pg.config, max: 2 });
      return {
        pool,
        definition: postgresBackend({ pool }),
        stillWorks: async () => (await pool.query('SELECT 1 AS one')).rows[0].one === 1,
        end: () => pool.end(),
      };
    },
    killHolder: async (pg) => {
      await pg.sql(
        `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted`,
      );
    },
    waiting: async (pg) =>
      Number(
        (
          await pg.sql<{ n: string }>(
            `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
          )
        )[0].n,
      ),
    wrongPassword: { password: 'wrong' },
    unknownDatabase: { database: 'nope' },
  });
});
