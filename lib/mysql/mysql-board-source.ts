import type { Pool, RowDataPacket } from 'mysql2/promise';
import type {
  BoardHeldKey,
  BoardHolder,
  BoardKeyLine,
  BoardScan,
  BoardSource,
} from '../core/board-source';
import { BOARD_TABLE, SqlBoardViews } from '../sql/sql-board-views';
import { MYSQL_BOARD_RELEASE_REFUSED } from './mysql.messages';

/** Where the server lists its named locks, best first (see `MysqlBoardSource`). */
type LockTable = 'metadata_lock_info' | 'performance_schema' | 'none';

/** A pool's connection attributes (mysql2 keeps them in its pool's config). */
type WithConfig = Pool & {
  pool?: { config?: { connectionConfig?: { connectAttributes?: Record<string, string> } } };
};

/** MariaDB's plugin: one row per granted user lock (`TABLE_SCHEMA` is the lock's name). */
const MARIADB_LOCKS = `
SELECT TABLE_SCHEMA AS name, THREAD_ID AS thread, 1 AS granted
FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_TYPE = 'User lock'`;

/**
 * MySQL 8 (and MariaDB with performance_schema on and its `wait/lock/metadata/sql/mdl`
 * instrument): holders and waiters, the waiters longest waiting first (`$WAITED`: ms each
 * connection has run its statement), each connection with the `program_name` it connected
 * with (the lock's own pool sends `nest-locked:<random>`).
 */
const PS_LOCKS = `
SELECT m.OBJECT_NAME AS name, t.PROCESSLIST_ID AS thread,
       m.LOCK_STATUS = 'GRANTED' AS granted, a.ATTR_VALUE AS owner,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 - $WAITED AS SIGNED) AS since
FROM performance_schema.metadata_locks m
JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
LEFT JOIN performance_schema.session_connect_attrs a
  ON a.PROCESSLIST_ID = t.PROCESSLIST_ID AND a.ATTR_NAME = 'program_name'
$JOIN
WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK'
ORDER BY granted DESC, $WAITED DESC, t.PROCESSLIST_ID`;

/** How long each connection has run its statement, ms: MariaDB's is to the ms. */
const WAITED = {
  mariadb: {
    join: 'LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.PROCESSLIST_ID',
    waited: 'p.TIME_MS',
  },
  mysql: { join: '', waited: 't.PROCESSLIST_TIME * 1000' },
};

const STATEMENTS = {
  create: `CREATE TABLE IF NOT EXISTS ${BOARD_TABLE} (grp VARCHAR(191) NOT NULL, id VARCHAR(64) NOT NULL, expires_at BIGINT NOT NULL, body MEDIUMTEXT NOT NULL, PRIMARY KEY (grp, id))`,
  upsert: `INSERT INTO ${BOARD_TABLE} (grp, id, expires_at, body) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at), body = VALUES(body)`,
  live: `SELECT id, body FROM ${BOARD_TABLE} WHERE grp = ? AND id <> '' AND expires_at > ?`,
  watched: `SELECT 1 AS open FROM ${BOARD_TABLE} WHERE grp = ? AND id = '' AND expires_at > ?`,
  remove: `DELETE FROM ${BOARD_TABLE} WHERE grp = ? AND id = ?`,
};

/** What the board's source needs of the MySQL backend of one group. */
export interface MysqlBoardBackend {
  readonly pool: Pool;
  readonly group: string;
  readonly keyPrefix: string;
  /** A key's lock name (the key with its prefix, or its digest). */
  lockName(key: string): string;
}

interface LockRow {
  readonly name: string;
  readonly thread: number;
  readonly granted: boolean;
  /** The connection's `program_name` (performance_schema only). */
  readonly owner: string | null;
  /** Since when its statement runs, server epoch ms (performance_schema only). */
  readonly since?: number;
}

/**
 * The lock board's reads on a MySQL / MariaDB group, from the best list of named locks the
 * server has, found once:
 * - MariaDB's `information_schema.METADATA_LOCK_INFO` (the `metadata_lock_info` plugin, not
 *   loaded by default: `INSTALL SONAME 'metadata_lock_info'`): every granted lock with its
 *   connection; waiters are not listed (the server shows a waiter's statement without its lock
 *   name), so lines are not read;
 * - `performance_schema.metadata_locks` (`USER LEVEL LOCK`; on by default on MySQL 8, off on
 *   MariaDB): holders and waiters;
 * - else `IS_USED_LOCK(name)` per key the instances name: holders only.
 * With performance_schema a connection is named by the `program_name` it connected with (the
 * lock's own pool sends `nest-locked:<random>` per process); without it no server names a
 * connection's process, and the holder's instance is the one that publishes a hold of the key. Views live in the table
 * `nest_locked_board`. A force release is `KILL CONNECTION` of the holder's connection when it
 * holds nothing else (refused where the server cannot tell).
 * @internal
 */
export class MysqlBoardSource implements BoardSource {
  readonly everyCaller = true;
  readonly views: SqlBoardViews;
  private table?: Promise<LockTable>;
  /** `PS_LOCKS` for this server (MariaDB or MySQL). */
  private psLocks = '';
  /** Lock names of the keys the last scan was given. */
  private names = new Map<string, string>();

  constructor(private readonly backend: MysqlBoardBackend) {
    const query = async (sql: string, values: readonly unknown[]) => {
      const [rows] = await backend.pool.query<RowDataPacket[]>(sql, [...values]);
      return rows as Array<Record<string, unknown>>;
    };
    this.views = new SqlBoardViews(query, STATEMENTS, `${backend.keyPrefix}${backend.group}`);
  }

  /** Lines are the server's only with performance_schema (see the class). */
  get queued(): boolean {
    return this.known === 'performance_schema';
  }

  get legend(): string {
    const base =
      "MySQL keeps no fence, no lease and no start of a hold: they come from the holder's published view.";
    if (this.known === 'performance_schema') return base;
    return `${base} Without performance_schema no connection is named: the holder's instance is the one that publishes a hold of the key ("—" when none does), and waiting lines are not shown (the server lists no lock a session waits for: turn on performance_schema with its wait/lock/metadata/sql/mdl instrument, and grant SELECT on it).`;
  }

  /** The lock table found (before the first scan: none yet). */
  private known?: LockTable;

  owner(): string | undefined {
    // The name this process's connections give (read by performance_schema only).
    return (this.backend.pool as WithConfig).pool?.config?.connectionConfig?.connectAttributes
      ?.program_name;
  }

  async serverTime(): Promise<number> {
    const [rows] = await this.backend.pool.query<RowDataPacket[]>(
      'SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) AS now',
    );
    return Number(rows[0].now);
  }

  async scan(search: string, maxScan: number, named: readonly string[]): Promise<BoardScan> {
    this.names = new Map(
      named.map((key) => [this.backend.lockName(this.backend.keyPrefix + key), key]),
    );
    const rows = (await this.locks([...this.names.keys()])).slice(0, maxScan);
    const held = new Set<string>();
    const waited = new Set<string>();
    for (const row of rows) {
      const key = this.keyOf(row.name);
      if (key === undefined || !key.includes(search)) continue;
      (row.granted ? held : waited).add(key);
    }
    return { held: [...held].sort(), waited: [...waited].sort(), complete: rows.length < maxScan };
  }

  async held(keys: readonly string[]): Promise<BoardHeldKey[]> {
    const rows = await this.locks(keys.map((k) => this.nameOf(k)));
    return keys.flatMap((key): BoardHeldKey[] => {
      const holder = rows.find((r) => r.granted && this.keyOf(r.name) === key);
      if (!holder) return [];
      const session = `${holder.thread}:${holder.name}`;
      const owner = holder.owner;
      return [{ key, mode: 'exclusive', leaseLeftMs: null, holders: [{ owner, session }] }];
    });
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    const rows = (await this.locks(keys.map((k) => this.nameOf(k)))).filter((r) => !r.granted);
    return keys.flatMap((key): BoardKeyLine[] => {
      const mine = rows.filter((r) => this.keyOf(r.name) === key);
      if (mine.length === 0) return [];
      const waiters = mine
        .slice(0, limit)
        .map((r) => ({ owner: r.owner, mode: 'exclusive' as const, since: r.since }));
      return [{ key, length: mine.length, waiters }];
    });
  }

  async forceRelease(key: string, holder: BoardHolder): Promise<boolean | string> {
    if (holder.session === undefined) return false;
    const colon = holder.session.indexOf(':');
    const thread = Number(holder.session.slice(0, colon));
    const name = holder.session.slice(colon + 1);
    if ((await this.lockTable()) === 'none') return MYSQL_BOARD_RELEASE_REFUSED(key, thread);
    const all = await this.locks([]);
    const others = all.filter((r) => r.thread === thread && r.granted && r.name !== name);
    if (others.length > 0) return MYSQL_BOARD_RELEASE_REFUSED(key, thread, others.length);
    // Still that connection's (it may have released and another taken the key meanwhile).
    const [rows] = await this.backend.pool.query<RowDataPacket[]>(
      'SELECT IS_USED_LOCK(?) AS thread',
      [name],
    );
    if (Number(rows[0].thread) !== thread) return false;
    await this.backend.pool.query(`KILL CONNECTION ${Math.trunc(thread)}`);
    return true;
  }

  /** Every named lock of the server (`names`: the ones to ask `IS_USED_LOCK` about). */
  private async locks(names: readonly string[]): Promise<LockRow[]> {
    const { pool } = this.backend;
    const table = await this.lockTable();
    if (table !== 'none') {
      const [rows] = await pool.query<RowDataPacket[]>(
        table === 'metadata_lock_info' ? MARIADB_LOCKS : this.psLocks,
      );
      return rows.map((r) => ({
        name: String(r.name),
        thread: Number(r.thread),
        granted: Boolean(Number(r.granted)),
        owner: typeof r.owner === 'string' ? r.owner : null,
        ...(r.since !== undefined && r.since !== null && { since: Number(r.since) }),
      }));
    }
    if (names.length === 0) return [];
    const [rows] = await pool.query<RowDataPacket[]>(
      `SELECT ${names.map((_, i) => `IS_USED_LOCK(?) AS h${i}`).join(', ')}`,
      [...names],
    );
    return names.flatMap((name, i) => {
      const thread = rows[0][`h${i}`] as number | null;
      return thread === null ? [] : [{ name, thread: Number(thread), granted: true, owner: null }];
    });
  }

  /** Which list of named locks this server has (asked once). */
  private lockTable(): Promise<LockTable> {
    this.table ??= this.findLockTable().then((t) => (this.known = t));
    return this.table;
  }

  private async findLockTable(): Promise<LockTable> {
    const { pool } = this.backend;
    const works = (sql: string) =>
      pool.query(`${sql} LIMIT 0`).then(
        () => true,
        () => false,
      );
    const [ps] = await pool
      .query<RowDataPacket[]>(
        "SELECT @@performance_schema AS ps, VERSION() LIKE '%MariaDB%' AS mariadb",
      )
      .catch(() => [[]] as unknown as [RowDataPacket[]]);
    const { join, waited } = Number(ps[0]?.mariadb) ? WAITED.mariadb : WAITED.mysql;
    this.psLocks = PS_LOCKS.replace('$JOIN', join).replaceAll('$WAITED', waited);
    if (Number(ps[0]?.ps) === 1 && (await works(this.psLocks))) return 'performance_schema';
    if (await works(MARIADB_LOCKS)) return 'metadata_lock_info';
    return 'none';
  }

  private keyOf(name: string): string | undefined {
    const named = this.names.get(name);
    if (named !== undefined) return named;
    const { keyPrefix } = this.backend;
    // A short name is the key itself (with its prefix); a digest no instance named is shown so.
    if (name.startsWith(keyPrefix) && name.length <= 64) return name.slice(keyPrefix.length);
    return /^[0-9a-f]{64}$/.test(name) ? `#${name}` : undefined;
  }

  private nameOf(key: string): string {
    return key.startsWith('#') ? key.slice(1) : this.backend.lockName(this.backend.keyPrefix + key);
  }
}
