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

/** MariaDB's plugin: one row per granted user lock (`TABLE_SCHEMA` is the lock's name). */
const MARIADB_LOCKS = `
SELECT TABLE_SCHEMA AS name, THREAD_ID AS thread, 1 AS granted
FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_TYPE = 'User lock'`;

/** MySQL 8 (and MariaDB with performance_schema on): holders and waiters, in queue order. */
const PS_LOCKS = `
SELECT m.OBJECT_NAME AS name, t.PROCESSLIST_ID AS thread,
       m.LOCK_STATUS = 'GRANTED' AS granted
FROM performance_schema.metadata_locks m
JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK'
ORDER BY m.OBJECT_INSTANCE_BEGIN`;

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
 * No server names a connection's process without performance_schema: the holder's instance is
 * the one instance that publishes a hold of the key. Views live in the table
 * `nest_locked_board`. A force release is `KILL CONNECTION` of the holder's connection when it
 * holds nothing else (refused where the server cannot tell).
 * @internal
 */
export class MysqlBoardSource implements BoardSource {
  readonly everyCaller = true;
  readonly views: SqlBoardViews;
  private table?: Promise<LockTable>;
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
      'MySQL keeps no fence, no lease and no start of a hold: they come from the holder\'s published view; the holder\'s instance is the one that publishes a hold of the key ("—" when none does).';
    if (this.known === 'performance_schema') return base;
    return `${base} Waiting lines are not shown: this server lists no lock a session waits for (turn on performance_schema).`;
  }

  /** The lock table found (before the first scan: none yet). */
  private known?: LockTable;

  owner(): undefined {
    return undefined;
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
      return [{ key, mode: 'exclusive', leaseLeftMs: null, holders: [{ owner: null, session }] }];
    });
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    const rows = (await this.locks(keys.map((k) => this.nameOf(k)))).filter((r) => !r.granted);
    return keys.flatMap((key): BoardKeyLine[] => {
      const mine = rows.filter((r) => this.keyOf(r.name) === key);
      if (mine.length === 0) return [];
      const waiters = mine.slice(0, limit).map(() => ({ owner: null, mode: 'exclusive' as const }));
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
        table === 'metadata_lock_info' ? MARIADB_LOCKS : PS_LOCKS,
      );
      return rows.map((r) => ({
        name: String(r.name),
        thread: Number(r.thread),
        granted: Boolean(Number(r.granted)),
      }));
    }
    if (names.length === 0) return [];
    const [rows] = await pool.query<RowDataPacket[]>(
      `SELECT ${names.map((_, i) => `IS_USED_LOCK(?) AS h${i}`).join(', ')}`,
      [...names],
    );
    return names.flatMap((name, i) => {
      const thread = rows[0][`h${i}`] as number | null;
      return thread === null ? [] : [{ name, thread: Number(thread), granted: true }];
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
      .query<RowDataPacket[]>("SHOW VARIABLES LIKE 'performance_schema'")
      .catch(() => [[]] as unknown as [RowDataPacket[]]);
    if (ps[0]?.Value === 'ON' && (await works(PS_LOCKS))) return 'performance_schema';
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
