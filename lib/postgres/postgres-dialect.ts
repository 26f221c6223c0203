import type { Pool, QueryConfig } from 'pg';
import type { BoardSource } from '../core/board-source';
import type { Share } from '../core/lease';
import { LockConfigError } from '../errors';
import { POSTGRES_PERMITS_ONE_KEY } from './postgres.messages';
import { keyDigest } from '../sql/key-hash';
import { SqlDialectBase } from '../sql/sql-dialect-base';
import type { SqlErrorCodes, SqlTarget } from '../sql/sql-errors';
import { PostgresBoardSource } from './postgres-board-source';
import { PostgresSession } from './postgres-session';

/** SQLSTATEs that mean a setting to fix. */
const CODES: SqlErrorCodes = {
  auth: ['28P01', '28000'],
  unknownDatabase: ['3D000'],
  denied: ['42501'],
};

/** `lock_timeout` ran out: still busy. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * The fence: the server's clock in microseconds since 1970, read after every lock of the
 * statement was granted. It needs no write (a sequence's `nextval` makes every 32nd lock wait for
 * a WAL flush) and, as the Redis engine's fences, grows with every hold of a key as long as the
 * server's clock does not step back: two holds of one key are at least a round trip apart. It
 * stays a safe JavaScript integer until the year 2255.
 */
const FENCE = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text`;

/**
 * The statements, as named prepared statements (parsed once per connection). Every one answers
 * the fence as text, or NULL for a try that found a key busy; `wait` and `try` take the keys as a
 * bigint array, in the caller's sorted order, `one` a single key.
 *
 * - Waiting: `set_config(..., true)` sets lock_timeout for this statement's implicit
 *   transaction only (a pooled connection of the application's keeps its own setting); the
 *   MATERIALIZED CTEs run in order (the timeout, every lock, then the fence), so the fence is
 *   read after every lock was granted.
 * - One fence for all the keys of a hold.
 */
function statements(lock: string, tryLock: string) {
  return {
    wait:
      `WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true)), ` +
      `l AS MATERIALIZED (SELECT ${lock}(k) FROM t, unnest($1::bigint[]) AS k) ` +
      `SELECT ${FENCE} AS fence FROM (SELECT count(*) FROM l) AS c`,
    try:
      `WITH l AS MATERIALIZED (SELECT bool_and(${tryLock}(k)) AS ok FROM unnest($1::bigint[]) AS k) ` +
      `SELECT CASE WHEN ok THEN ${FENCE} END AS fence FROM l`,
    // The uncontended path: no array, no CTE (CASE reads the fence only once the try succeeded).
    one: `SELECT CASE WHEN ${tryLock}($1::bigint) THEN ${FENCE} END AS fence`,
  };
}

type Statements = Record<keyof ReturnType<typeof statements>, QueryConfig>;

/** Frees every lock of the session: prepared too, as it ends every hold. */
const UNLOCK_ALL: QueryConfig = {
  name: 'nest-locked:unlock',
  text: 'SELECT pg_advisory_unlock_all()',
};

/**
 * Slot `($2 + s.i) % $3` of the key whose lock name is `$1`, as a bigint advisory lock: the first
 * 8 bytes of the SHA-256 of `<key lock name>#permit:<slot>`, as `lockName` names it (the wait
 * names the starting slot in JavaScript).
 */
const SLOT =
  `('x' || encode(substring(sha256(convert_to(` +
  `$1::text || '#permit:' || (($2::bigint + s.i) % $3::bigint), 'UTF8')) FROM 1 FOR 8), 'hex'))` +
  `::bit(64)::bigint`;

/**
 * The fence of a permit, once the CTE `p` has a row (a slot taken): holders of one key's permits
 * are granted at once, and two sessions may read the same microsecond. So each reads the clock
 * under a transaction-level advisory lock of the key's (`$fenceLock`, held to the statement's
 * end, microseconds) and does not end its statement before the clock has passed what it read:
 * the next one reads a later microsecond.
 */
const permitFence = (fenceLock: string) =>
  `x AS MATERIALIZED (SELECT pg_advisory_xact_lock(${fenceLock}) FROM p), ` +
  `f AS MATERIALIZED (SELECT ${FENCE} AS fence FROM x), ` +
  `w(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM w, f ` +
  `WHERE ${FENCE}::bigint <= f.fence::bigint AND n < 1000000) ` +
  `SELECT fence FROM f, (SELECT count(*) FROM w) AS c`;

/**
 * A permit: the first free slot of the key, walking from slot `$2` over the `$3` slots; no row
 * when all are held. The walk is a recursive CTE, which PostgreSQL evaluates only as far as
 * LIMIT pulls it: it stops at the first slot it takes, so it tries at most one slot more than
 * are held (each held slot is a session of the server), whatever N is.
 */
const PERMIT_TRY = {
  name: 'nest-locked:p:walk',
  text:
    `WITH RECURSIVE s(i) AS (SELECT 0::bigint UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $3::bigint), ` +
    `p AS MATERIALIZED (SELECT 1 FROM s WHERE pg_try_advisory_lock(${SLOT}) LIMIT 1), ` +
    permitFence('$4::bigint'),
};

/** A permit by waiting for slot `$1` (a lock name) under lock_timeout `$2`. */
const PERMIT_WAIT = {
  name: 'nest-locked:p:wait',
  text:
    `WITH RECURSIVE t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true)), ` +
    `p AS MATERIALIZED (SELECT pg_advisory_lock($1::bigint) FROM t), ` +
    permitFence('$3::bigint'),
};

/**
 * PostgreSQL session advisory locks (`nest-locked/postgres`).
 *
 * - A key is one 64-bit advisory lock: the first 8 bytes of the SHA-256 of the key (with the
 *   keyPrefix), as a signed bigint. Two given keys share a lock with odds 2^-64.
 * - Exclusive holds use `pg_advisory_lock`, read holds `pg_advisory_lock_shared`; waiting is the
 *   server's lock queue under `lock_timeout` (FIFO: a later shared request queues behind a
 *   waiting exclusive one).
 * - Permits of N are N advisory locks per key ("slots", as segments are slices): a holder takes
 *   the first free one from a starting slot that turns at every call, or waits in the queue of
 *   one slot (so it may wait while another slot frees: FIFO per slot, not per key).
 * - A hold keeps its pooled connection until it is released (`pg_advisory_unlock_all()`: the
 *   session is the hold's alone).
 * @internal
 */
export class PostgresDialect extends SqlDialectBase<PostgresSession, Pool> {
  readonly kind = 'postgres';
  /** The slot the next permit starts from (holders spread over the slots). */
  private turn = 0;
  private readonly exclusive: Statements;
  private readonly shared: Statements;

  constructor(pool: Pool, owned: boolean, target: SqlTarget, size: number) {
    super(pool, owned, target, CODES, size);
    const named = (name: string, s: ReturnType<typeof statements>) => ({
      wait: { name: `nest-locked:${name}:wait`, text: s.wait },
      try: { name: `nest-locked:${name}:try`, text: s.try },
      one: { name: `nest-locked:${name}:one`, text: s.one },
    });
    this.exclusive = named('x', statements('pg_advisory_lock', 'pg_try_advisory_lock'));
    this.shared = named('s', statements('pg_advisory_lock_shared', 'pg_try_advisory_lock_shared'));
  }

  lockName(key: string): string {
    return keyDigest(key).readBigInt64BE(0).toString();
  }

  async checkout(): Promise<PostgresSession> {
    return new PostgresSession(await this.pool.connect());
  }

  saturated(): boolean {
    return this.pool.idleCount === 0 && this.pool.totalCount >= this.size;
  }

  async lock(
    session: PostgresSession,
    names: readonly string[],
    share: Share | undefined,
    waitMs: number,
    contended: boolean,
  ): Promise<number[] | undefined> {
    if (typeof share === 'number') return this.permit(session, names, share, waitMs);
    const s = share === 'read' ? this.shared : this.exclusive;
    let fence: string | null = null;
    // A key most likely free is tried first: the try is the plain statement, as cheap as the
    // raw lock, and never passes a waiter (a try conflicts with requests already queued).
    if (waitMs <= 0 || (!contended && names.length === 1)) {
      const { rows } = await session.client.query<{ fence: string | null }>(
        names.length === 1 ? { ...s.one, values: [names[0]] } : { ...s.try, values: [names] },
      );
      fence = rows[0].fence;
    }
    if (fence === null && waitMs > 0) {
      try {
        const { rows } = await session.client.query<{ fence: string | null }>({
          ...s.wait,
          values: [names, `${Math.ceil(waitMs)}ms`],
        });
        fence = rows[0].fence;
      } catch (err) {
        if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
      }
    }
    if (fence !== null) return names.map(() => Number(fence));
    // A multi-key wait or try may have taken some keys before the busy one.
    if (names.length > 1) await this.unlock(session);
    return undefined;
  }

  /** One of `permits` slots of the key, or undefined when all stayed held. */
  private async permit(
    session: PostgresSession,
    names: readonly string[],
    permits: number,
    waitMs: number,
  ): Promise<number[] | undefined> {
    if (names.length !== 1) {
      throw new LockConfigError(POSTGRES_PERMITS_ONE_KEY(names.length), 'permits');
    }
    const start = this.turn++ % permits;
    const fenceLock = this.lockName(`${names[0]}#fence`);
    const { rows } = await session.client.query<{ fence: string }>({
      ...PERMIT_TRY,
      values: [names[0], start, permits, fenceLock],
    });
    let fence = rows[0]?.fence ?? null;
    if (fence === null && waitMs > 0) {
      try {
        const first = this.lockName(`${names[0]}#permit:${start}`);
        const { rows: waited } = await session.client.query<{ fence: string }>({
          ...PERMIT_WAIT,
          values: [first, `${Math.ceil(waitMs)}ms`, fenceLock],
        });
        fence = waited[0].fence;
      } catch (err) {
        if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
        // The timeout may have met the fence's lock after the slot was granted.
        await this.unlock(session);
      }
    }
    return fence === null ? undefined : [Number(fence)];
  }

  async unlock(session: PostgresSession): Promise<void> {
    await session.client.query(UNLOCK_ALL);
  }

  async keepAlive(session: PostgresSession): Promise<void> {
    await session.client.query('SELECT 1');
  }

  async isLocked(name: string): Promise<boolean> {
    // A bigint advisory lock shows in pg_locks as classid (high 32 bits) and objid (low 32 bits).
    const key = BigInt.asUintN(64, BigInt(name));
    const { rows } = await this.pool.query<{ held: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted ` +
        `AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ` +
        `AND classid = $1::oid AND objid = $2::oid AND objsubid = 1) AS held`,
      [(key >> 32n).toString(), (key & 0xffffffffn).toString()],
    );
    return rows[0].held;
  }

  boardSource(group: string, keyPrefix: string): BoardSource {
    const lockName = (key: string) => this.lockName(key);
    return new PostgresBoardSource({ pool: this.pool, group, keyPrefix, lockName });
  }

  async kill(id: number): Promise<void> {
    if (id > 0) await this.pool.query('SELECT pg_terminate_backend($1)', [id]);
  }
}
