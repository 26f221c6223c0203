import { performance } from 'node:perf_hooks';
import type { Pool, RowDataPacket } from 'mysql2/promise';
import type { BoardSource } from '../core/board-source';
import { keyDigest } from '../sql/key-hash';
import { SqlDialectBase } from '../sql/sql-dialect-base';
import type { SqlErrorCodes } from '../sql/sql-errors';
import { MysqlBoardSource } from './mysql-board-source';
import { MysqlSession } from './mysql-session';

/** mysql2 error codes that mean a setting to fix. @internal */
export const MYSQL_ERROR_CODES: SqlErrorCodes = {
  auth: ['ER_ACCESS_DENIED_ERROR', 'ER_ACCESS_DENIED_NO_PASSWORD_ERROR'],
  // MySQL answers a database the user may not use the same whether or not it exists.
  unknownDatabase: ['ER_BAD_DB_ERROR', 'ER_DBACCESS_DENIED_ERROR'],
  denied: ['ER_SPECIFIC_ACCESS_DENIED_ERROR'],
};

/** Names up to this length, without capitals, are used as they are (see `lockName`). */
const PLAIN_NAME_MAX = 63;

/**
 * The fence, drawn after the lock was granted (the IF waits for GET_LOCK): `UUID_SHORT()` is
 * `server_id << 56 | server start (s) << 24 | a counter` and grows with every call on a server
 * and across its restarts (as long as its clock does not go back and it hands out fewer than
 * 16.7 million a second on average). Without the server id, and counted from 2025-01-01, it stays
 * a safe JavaScript integer until 2042. No write, so no commit to wait for. Run as a prepared
 * statement (`execute`, parsed once per connection), as is the unlock.
 */
const LOCK = `SELECT IF(GET_LOCK(?, ?) = 1, (UUID_SHORT() & 0xFFFFFFFFFFFFFF) - (1735689600 << 24), NULL) AS fence`;

/**
 * MySQL 8 / MariaDB 10.6+ named locks (`nest-locked/mysql`): `GET_LOCK` on a connection held for
 * the hold, waiting in the server's own queue up to the timeout it is given.
 *
 * - A key's lock name is the key with its keyPrefix when it has at most 63 characters and no
 *   capital letter (the servers compare names without case); otherwise the 64 hex digits of its
 *   SHA-256 (two given keys share a name with odds 2^-256).
 * - Several keys are taken one statement each, in the caller's sorted order (no deadlock), each
 *   with what is left of the wait; a busy one frees those taken (`RELEASE_ALL_LOCKS()`).
 * @internal
 */
export class MysqlDialect extends SqlDialectBase<MysqlSession, Pool> {
  readonly kind = 'mysql';
  /** Connections checked out by this backend. */
  private out = 0;
  private readonly returned = () => this.out--;

  lockName(key: string): string {
    if (key.length <= PLAIN_NAME_MAX && !/[A-Z]/.test(key)) return key;
    return keyDigest(key).toString('hex');
  }

  async checkout(): Promise<MysqlSession> {
    const connection = await this.pool.getConnection();
    this.out++;
    return new MysqlSession(connection, this.returned);
  }

  saturated(): boolean {
    return this.out >= this.size;
  }

  async lock(
    session: MysqlSession,
    names: readonly string[],
    _share: undefined,
    waitMs: number,
  ): Promise<number[] | undefined> {
    const deadline = performance.now() + waitMs;
    const fences: number[] = [];
    for (const name of names) {
      const seconds = Math.max(0, deadline - performance.now()) / 1000;
      const [rows] = await session.connection.execute<RowDataPacket[]>(LOCK, [name, seconds]);
      const fence = rows[0].fence as number | string | null;
      if (fence === null) {
        if (fences.length > 0) await this.unlock(session);
        return undefined;
      }
      fences.push(Number(fence));
    }
    return fences;
  }

  async unlock(session: MysqlSession): Promise<void> {
    await session.connection.execute('SELECT RELEASE_ALL_LOCKS()');
  }

  async keepAlive(session: MysqlSession): Promise<void> {
    await session.connection.query('SELECT 1');
  }

  async isLocked(name: string): Promise<boolean> {
    const [rows] = await this.pool.query<RowDataPacket[]>('SELECT IS_USED_LOCK(?) AS holder', [
      name,
    ]);
    return rows[0].holder !== null;
  }

  boardSource(group: string, keyPrefix: string): BoardSource {
    const lockName = (key: string) => this.lockName(key);
    return new MysqlBoardSource({ pool: this.pool, group, keyPrefix, lockName });
  }

  async kill(id: number): Promise<void> {
    if (id > 0) await this.pool.query(`KILL CONNECTION ${Math.trunc(id)}`);
  }
}
