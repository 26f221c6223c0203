import type { Pool } from 'pg';
import type {
  BoardHeldKey,
  BoardHolder,
  BoardKeyLine,
  BoardMode,
  BoardScan,
  BoardSource,
} from '../core/board-source';
import { BOARD_TABLE, SqlBoardViews } from '../sql/sql-board-views';
import { POSTGRES_BOARD_RELEASE_REFUSED } from './postgres.messages';

/**
 * The advisory locks of this database with their session (`pg_locks` joined with
 * `pg_stat_activity`), each lock as the signed bigint it was taken with (`classid` the high 32
 * bits, `objid` the low ones). $1: the lock ids asked for (NULL: every one); $2 the rows at most.
 */
const LOCKS = `
SELECT ((l.classid::bigint << 32) | l.objid::bigint)::text AS id, l.mode, l.granted, l.pid,
       a.application_name AS app,
       (extract(epoch FROM l.waitstart) * 1000)::bigint::text AS waitstart
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ($1::bigint[] IS NULL OR ((l.classid::bigint << 32) | l.objid::bigint) = ANY ($1::bigint[]))
ORDER BY l.granted DESC, l.waitstart NULLS FIRST
LIMIT $2`;

/** Ends the session `$1` if it still holds the lock `$2` and no other one. */
const TERMINATE = `
SELECT pg_terminate_backend($1) AS done
WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1
                AND ((classid::bigint << 32) | objid::bigint) = $2::bigint)`;

/** The locks `$1` holds besides `$2` (a session of several keys, or of the app's own). */
const OTHERS = `
SELECT count(*)::int AS n FROM pg_locks
WHERE pid = $1 AND locktype = 'advisory' AND granted
  AND ((classid::bigint << 32) | objid::bigint) <> $2::bigint`;

const STATEMENTS = {
  create: `CREATE UNLOGGED TABLE IF NOT EXISTS ${BOARD_TABLE} (grp text NOT NULL, id text NOT NULL, expires_at bigint NOT NULL, body text NOT NULL, PRIMARY KEY (grp, id))`,
  upsert: `INSERT INTO ${BOARD_TABLE} (grp, id, expires_at, body) VALUES ($1, $2, $3, $4) ON CONFLICT (grp, id) DO UPDATE SET expires_at = EXCLUDED.expires_at, body = EXCLUDED.body`,
  live: `SELECT id, body FROM ${BOARD_TABLE} WHERE grp = $1 AND id <> '' AND expires_at > $2`,
  watched: `SELECT 1 FROM ${BOARD_TABLE} WHERE grp = $1 AND id = '' AND expires_at > $2`,
  remove: `DELETE FROM ${BOARD_TABLE} WHERE grp = $1 AND id = $2`,
};

/** What the board's source needs of the PostgreSQL backend of one group. */
export interface PostgresBoardBackend {
  readonly pool: Pool;
  readonly group: string;
  readonly keyPrefix: string;
  /** A key's lock id (a signed bigint, as text). */
  lockName(key: string): string;
}

/** A row of `LOCKS`. */
interface LockRow {
  id: string;
  mode: string;
  granted: boolean;
  pid: number;
  app: string | null;
  waitstart: string | null;
}

/** A lock id the page names: its key. */
interface Named {
  readonly key: string;
}

/** Keys (and permit slots) whose lock ids are known: the names the instances publish. */
type Names = Map<string, Named>;

/**
 * The lock board's reads on a PostgreSQL group: one query of `pg_locks` with
 * `pg_stat_activity` per read (every session's advisory locks: granted ones are holders,
 * waiting ones the lines in order of `waitstart`), each session named by its
 * `application_name` (the lock's own pool names each process `nest-locked:<random>`). A lock
 * id is a digest of its key: the keys come from the instances' views (a key no instance
 * publishes shows as `#<lock id>`). Views live in the table `nest_locked_board`. A force
 * release ends the holder's session (`pg_terminate_backend`) when it holds nothing else.
 * @internal
 */
export class PostgresBoardSource implements BoardSource {
  readonly everyCaller = true;
  readonly queued = true;
  readonly views: SqlBoardViews;
  readonly legend =
    'PostgreSQL keeps no fence, no lease and no start of a hold: fence, held for and lease left come from the holder\'s published view ("—" for a process without the board); a key no instance names shows as #<advisory lock id>.';
  /** The ids of the keys the last scan was given, kept for the reads of the same refresh. */
  private names: Names = new Map();
  /** Lock ids per key named before (a digest per id: computed once). */
  private readonly digests = new Map<string, string[]>();

  constructor(private readonly backend: PostgresBoardBackend) {
    const query = async (sql: string, values: readonly unknown[]) =>
      (await backend.pool.query(sql, [...values])).rows as Array<Record<string, unknown>>;
    this.views = new SqlBoardViews(query, STATEMENTS, `${backend.keyPrefix}${backend.group}`);
  }

  owner(): string | undefined {
    return this.backend.pool.options.application_name;
  }

  async serverTime(): Promise<number> {
    const { rows } = await this.backend.pool.query<{ now: string }>(
      `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS now`,
    );
    return Number(rows[0].now);
  }

  async scan(search: string, maxScan: number, named: readonly string[]): Promise<BoardScan> {
    this.names = this.namesOf(named);
    const rows = await this.locks(null, maxScan);
    const held = new Set<string>();
    const waited = new Set<string>();
    for (const row of rows) {
      const key = this.keyOf(row.id);
      if (!key.includes(search)) continue;
      (row.granted ? held : waited).add(key);
    }
    return { held: [...held].sort(), waited: [...waited].sort(), complete: rows.length < maxScan };
  }

  async held(keys: readonly string[]): Promise<BoardHeldKey[]> {
    const rows = (await this.locks(this.idsOf(keys), null)).filter((r) => r.granted);
    return keys.flatMap((key): BoardHeldKey[] => {
      const mine = rows.filter((r) => this.keyOf(r.id) === key);
      if (mine.length === 0) return [];
      const holders = mine.map((r): BoardHolder => ({
        owner: r.app || null,
        session: `${r.pid}:${r.id}`,
      }));
      return [{ key, mode: this.modeOf(mine[0]), leaseLeftMs: null, holders }];
    });
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    const rows = (await this.locks(this.idsOf(keys), null)).filter((r) => !r.granted);
    return keys.flatMap((key): BoardKeyLine[] => {
      const mine = rows.filter((r) => this.keyOf(r.id) === key);
      if (mine.length === 0) return [];
      const waiters = mine.slice(0, limit).map((r) => ({
        // A session without an application_name names no process.
        owner: r.app || null,
        mode: this.modeOf(r),
        ...(r.waitstart !== null && { since: Number(r.waitstart) }),
      }));
      return [{ key, length: mine.length, waiters }];
    });
  }

  async forceRelease(key: string, holder: BoardHolder): Promise<boolean | string> {
    if (holder.session === undefined) return false;
    const [pid, id] = holder.session.split(':');
    const { pool } = this.backend;
    const { rows: others } = await pool.query<{ n: number }>(OTHERS, [pid, id]);
    if (others[0].n > 0) return POSTGRES_BOARD_RELEASE_REFUSED(key, Number(pid), others[0].n);
    const { rows } = await pool.query<{ done: boolean }>(TERMINATE, [pid, id]);
    return rows[0]?.done === true;
  }

  private async locks(ids: string[] | null, limit: number | null): Promise<LockRow[]> {
    const { rows } = await this.backend.pool.query<LockRow>(LOCKS, [ids, limit]);
    return rows;
  }

  /** The lock ids of `named` keys and of their first permit slots (digests kept a while). */
  private namesOf(named: readonly string[]): Names {
    const names: Names = new Map();
    if (this.digests.size > DIGESTS_KEPT) this.digests.clear();
    for (const key of named) {
      let ids = this.digests.get(key);
      if (!ids) {
        const id = this.backend.lockName(this.backend.keyPrefix + key);
        ids = [id];
        for (let slot = 0; slot < PERMIT_SLOTS_NAMED; slot++) {
          ids.push(this.backend.lockName(`${id}#permit:${slot}`));
        }
        this.digests.set(key, ids);
      }
      for (const id of ids) names.set(id, { key });
    }
    return names;
  }

  /** The key a lock id stands for, or `#<id>` for a key no instance named. */
  private keyOf(id: string): string {
    return this.names.get(id)?.key ?? `#${id}`;
  }

  /** Every lock id of `keys` (a key, its permit slots, or a `#<id>`). */
  private idsOf(keys: readonly string[]): string[] {
    const wanted = new Set(keys);
    const ids = keys.filter((k) => k.startsWith('#')).map((k) => k.slice(1));
    for (const [id, { key }] of this.names) if (wanted.has(key)) ids.push(id);
    for (const key of keys) {
      if (!key.startsWith('#') && ![...this.names.values()].some((n) => n.key === key)) {
        ids.push(this.backend.lockName(this.backend.keyPrefix + key));
      }
    }
    return ids;
  }

  private modeOf(row: LockRow): BoardMode {
    // A permit's slot is an exclusive lock: its holder's view tells the key's N.
    return row.mode === 'ShareLock' ? 'read' : 'exclusive';
  }
}

/** Permit slots named per key (a permit of a larger N in a higher slot shows as `#<id>`). */
const PERMIT_SLOTS_NAMED = 8;
/** Keys whose lock ids are kept between refreshes. */
const DIGESTS_KEPT = 10_000;
