import * as path from 'node:path';
import { createConnection, type ConnectionOptions, type RowDataPacket } from 'mysql2/promise';
import {
  copyTemplate,
  type DatabaseServerHandle,
  serverDir,
  startDatabaseServer,
} from './database-server';
import { closedPort } from './redis-server';
import { ensureBinary } from './server-binary';

/**
 * A throwaway MariaDB server for the SQL suites: a copy of what `mariadb-install-db` made once
 * (see `copyTemplate`) in a temp dir, then `mariadbd` on 127.0.0.1 and a free port (its socket
 * and its tmpdir in the same dir). The suites connect as `locks` / `locks` to database `locks`
 * (created at start, with grants), so a wrong password is a real authentication failure; `sql`
 * runs as root over the socket.
 *
 * @example
 * const db = await startMariadb();
 * const definition = mysqlBackend(db.config);
 * // ...
 * await db.stop();
 */

const BIN_DIRS = ['/usr/sbin', '/usr/bin'];
export const MARIADB_USER = 'locks';

export interface MariadbServerHandle extends DatabaseServerHandle {
  /** mysql2 options of the `locks` user on database `locks`, over TCP. */
  readonly config: ConnectionOptions & {
    host: string;
    port: number;
    user: string;
    database: string;
  };
  /** Runs one statement as root on a fresh connection and returns its rows. */
  sql<R = RowDataPacket>(text: string, values?: unknown[]): Promise<R[]>;
}

/** Starts a fresh server and resolves once it answers as root, with the `locks` user made. */
export async function startMariadb(
  options: {
    /** Turn on performance_schema with its metadata-lock instrument (the lock board reads it). */
    performanceSchema?: boolean;
  } = {},
): Promise<MariadbServerHandle> {
  const mariadbd = ensureBinary('mariadbd', 'mariadb-server', BIN_DIRS);
  const installDb = ensureBinary('mariadb-install-db', 'mariadb-server', BIN_DIRS);
  const dir = serverDir('mariadb');
  const data = path.join(dir, 'data');
  // Each its own tmpdir (the install and the server): a mariadbd that starts deletes the temp
  // tables (`#sql-temptable-*`) it finds in its tmpdir, so in a shared /tmp it broke the install
  // of a server starting beside it ("Unknown table 'mysql.tmp_user_sys'").
  copyTemplate(
    {
      kind: 'mariadb',
      command: installDb,
      args: (at) => [
        '--no-defaults',
        `--datadir=${path.join(at, 'data')}`,
        `--tmpdir=${at}`,
        '--user=root',
        '--auth-root-authentication-method=normal',
        '--skip-test-db',
      ],
    },
    data,
  );
  const port = await closedPort();
  const socketPath = path.join(dir, 's');
  const root: ConnectionOptions = { socketPath, user: 'root' };
  const sql = async <R>(text: string, values?: unknown[]): Promise<R[]> => {
    const connection = await createConnection({ ...root, connectTimeout: 2_000 });
    connection.on('error', () => undefined);
    try {
      const [rows] = await connection.query(text, values);
      return rows as R[];
    } finally {
      connection.destroy();
    }
  };
  const server = await startDatabaseServer(
    {
      binary: 'mariadbd',
      command: mariadbd,
      args: [
        '--no-defaults',
        `--datadir=${data}`,
        `--port=${port}`,
        `--socket=${socketPath}`,
        `--tmpdir=${dir}`,
        '--user=root',
        '--bind-address=127.0.0.1',
        '--skip-name-resolve',
        '--innodb-buffer-pool-size=16M',
        '--innodb-flush-log-at-trx-commit=2',
        '--skip-log-bin',
        ...(options.performanceSchema
          ? [
              '--performance-schema=ON',
              '--performance-schema-instrument=wait/lock/metadata/sql/mdl=ON',
            ]
          : []),
      ],
      stopSignal: 'SIGTERM',
      ready: async () => (await sql('SELECT 1')).length === 1,
    },
    port,
    dir,
  );
  await sql('CREATE DATABASE IF NOT EXISTS locks');
  await sql(`CREATE USER IF NOT EXISTS '${MARIADB_USER}'@'%' IDENTIFIED BY 'locks'`);
  await sql(`GRANT ALL ON locks.* TO '${MARIADB_USER}'@'%'`);
  // To end other sessions of the same user (KILL) and read every process.
  await sql(`GRANT CONNECTION ADMIN, PROCESS ON *.* TO '${MARIADB_USER}'@'%'`).catch(() =>
    sql(`GRANT SUPER, PROCESS ON *.* TO '${MARIADB_USER}'@'%'`),
  );
  return Object.assign(server, {
    config: { host: '127.0.0.1', port, user: MARIADB_USER, password: 'locks', database: 'locks' },
    sql,
  });
}
