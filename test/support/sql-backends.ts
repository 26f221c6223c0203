import { createPool, type RowDataPacket } from 'mysql2/promise';
import { Pool } from 'pg';
import { mysqlBackend } from 'nest-locked/mysql';
import { postgresBackend } from 'nest-locked/postgres';
import { type MariadbServerHandle, startMariadb } from './mariadb-server';
import { type PostgresServerHandle, startPostgres } from './postgres-server';
import type { SqlBackendUnderTest } from './sql-backend-suite';

/** PostgreSQL as the SQL suites drive it. */
export const postgresUnderTest: SqlBackendUnderTest<PostgresServerHandle> = {
  name: 'postgres',
  start: () => startPostgres(),
  connection: (pg) => ({ ...pg.config }),
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
  killSession: async (pg, id) => {
    await pg.sql('SELECT pg_terminate_backend($1)', [id]);
  },
  waiters: async (pg) =>
    (
      await pg.sql<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
      )
    ).map((row) => Number(row.pid)),
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
};

/** MariaDB (for MySQL 8 and MariaDB 10.6+) as the SQL suites drive it. */
export const mysqlUnderTest: SqlBackendUnderTest<MariadbServerHandle> = {
  name: 'mysql',
  start: () => startMariadb(),
  connection: (db) => ({ ...db.config }),
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
  killSession: async (db, id) => {
    await db.sql(`KILL ${Number(id)}`);
  },
  waiters: async (db) =>
    (
      await db.sql<{ id: number }>(
        `SELECT ID AS id FROM information_schema.PROCESSLIST ` +
          `WHERE INFO LIKE 'SELECT IF(GET_LOCK%' AND STATE LIKE '%lock%'`,
      )
    ).map((row) => Number(row.id)),
  waiting: async (db) => {
    const [{ n }] = await db.sql<{ n: number }>(
      `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST ` +
        `WHERE INFO LIKE 'SELECT IF(GET_LOCK%' AND STATE LIKE '%lock%'`,
    );
    return Number(n);
  },
  wrongPassword: { password: 'wrong' },
  unknownDatabase: { database: 'nope' },
};
