import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client, type ClientConfig } from 'pg';
import {
  copyTemplate,
  type DatabaseServerHandle,
  serverDir,
  startDatabaseServer,
} from './database-server';
import { closedPort } from './redis-server';
import { ensureBinary } from './server-binary';

/**
 * A throwaway PostgreSQL cluster for the SQL suites: a copy of what `initdb` made once (see
 * `copyTemplate`) in a temp dir, `postgres` on 127.0.0.1 and a free port, both run as the
 * `postgres` user (initdb refuses root). Password authentication over TCP (`postgres` /
 * `postgres`), so the suites can test a wrong password.
 *
 * @example
 * const pg = await startPostgres();
 * const definition = postgresBackend({ connectionString: pg.url });
 * // ...
 * await pg.stop();
 */

const BIN_DIRS = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin'];
export const PG_PASSWORD = 'postgres';

export interface PostgresServerHandle extends DatabaseServerHandle {
  /** `postgres://postgres:postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  /** pg client options of the superuser, for a test's own connections. */
  readonly config: ClientConfig;
  /** Runs one statement on a fresh connection of its own and returns its rows. */
  sql<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
}

export interface StartPostgresOptions {
  /** fsync and synchronous commit on, as in production (the bench); off by default (tests). */
  durable?: boolean;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line)
    throw new Error('No postgres user: install PostgreSQL (`apt-get install postgresql`).');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Starts a fresh cluster and resolves once it answers a query. */
export async function startPostgres(
  options: StartPostgresOptions = {},
): Promise<PostgresServerHandle> {
  const postgres = ensureBinary('postgres', 'postgresql', BIN_DIRS);
  const initdb = path.join(path.dirname(postgres), 'initdb');
  const user = postgresUser();
  const dir = serverDir('postgres', user);
  const data = path.join(dir, 'data');
  copyTemplate(
    {
      kind: 'postgres',
      command: initdb,
      args: (at) => [
        ...['-D', path.join(at, 'data'), '-U', 'postgres', '--pwfile', path.join(at, 'pw')],
        ...['--auth=scram-sha-256', '--no-sync'],
      ],
      prepare: (at) => {
        fs.writeFileSync(path.join(at, 'pw'), PG_PASSWORD);
        if (user) fs.chownSync(path.join(at, 'pw'), user.uid, user.gid);
      },
      user,
    },
    data,
  );
  const port = await closedPort();
  const config: ClientConfig = {
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password: PG_PASSWORD,
    database: 'postgres',
  };
  const speed = options.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off'];
  const server = await startDatabaseServer(
    {
      binary: 'postgres',
      command: postgres,
      args: [
        ...['-D', data, '-p', String(port), '-k', dir],
        ...['-c', 'listen_addresses=127.0.0.1', '-c', 'shared_buffers=16MB'],
        ...speed,
      ],
      stopSignal: 'SIGINT',
      user,
      ready: async () => (await query(config, 'SELECT 1')).length === 1,
    },
    port,
    dir,
  );
  return Object.assign(server, {
    url: `postgres://postgres:${PG_PASSWORD}@127.0.0.1:${port}/postgres`,
    config,
    sql: <R>(text: string, values?: unknown[]) => query<R>(config, text, values),
  });
}

async function query<R = Record<string, unknown>>(
  config: ClientConfig,
  text: string,
  values?: unknown[],
): Promise<R[]> {
  const client = new Client({ ...config, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.query(text, values)).rows as R[];
  } finally {
    await client.end().catch(() => undefined);
  }
}
