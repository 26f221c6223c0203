import type { INestApplication } from '@nestjs/common';
import { Pool } from 'pg';
import {
  LockConfigError,
  LockNotAcquiredError,
  LockService,
  type RedlockModuleOptions,
} from 'nest-locked';
import { postgresBackend } from 'nest-locked/postgres';
import { keyDigest } from '../../../lib/sql/key-hash';
import { createLockApp, uniquePrefix, within } from '../../support/lock-app';
import { type PostgresServerHandle, startPostgres } from '../../support/postgres-server';
import { describeSqlBackend, waitFor } from '../../support/sql-backend-suite';
import { postgresUnderTest } from '../../support/sql-backends';

let pg: PostgresServerHandle;
beforeAll(async () => {
  pg = await startPostgres();
}, 60_000);
afterAll(() => pg?.stop());

describe('postgresBackend (real PostgreSQL)', () =>
  describeSqlBackend(postgresUnderTest, () => pg));

/** What PostgreSQL gives beyond the shared SQL suite: read locks, its grant order, its settings. */
describe('postgresBackend: read locks, permits, session settings, pool size (real PostgreSQL)', () => {
  const apps: INestApplication[] = [];
  let prefix: string;

  const locks = async (options: Partial<RedlockModuleOptions> = {}): Promise<LockService> => {
    const app = await createLockApp({
      options: { backend: postgresBackend(pg.config), keyPrefix: prefix, ...options },
    });
    apps.push(app);
    return app.get(LockService);
  };
  /** Requests waiting in PostgreSQL's advisory lock queue right now. */
  const waiting = async (): Promise<number> =>
    Number(
      (
        await pg.sql<{ n: string }>(
          `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
        )
      )[0].n,
    );

  beforeEach(() => (prefix = uniquePrefix('pg')));
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  it('read holds share a key and exclude a writer; a reader after a waiting writer waits behind it', async () => {
    const [r1, r2, w, r3] = [await locks(), await locks(), await locks(), await locks()];
    const a = await r1.acquire('doc', { mode: 'read' });
    const b = await r2.acquire('doc', { mode: 'read', waitTimeout: 0 });
    const order: string[] = [];
    const writer = w.acquire('doc', { waitTimeout: 10_000 }).then((h) => {
      order.push('writer');
      return h;
    });
    await waitFor(async () => (await waiting()) === 1);
    const lateReader = r3.acquire('doc', { mode: 'read', waitTimeout: 10_000 }).then((h) => {
      order.push('late reader');
      return h;
    });
    await waitFor(async () => (await waiting()) === 2);
    await a.release();
    await b.release();
    const wh = await within(writer, 10_000, 'the writer');
    expect(order).toEqual(['writer']);
    expect(wh.fence).toBeGreaterThan(Math.max(a.fence, b.fence));
    await wh.release();
    const rh = await within(lateReader, 10_000, 'the late reader');
    expect(order).toEqual(['writer', 'late reader']);
    expect(rh.fence).toBeGreaterThan(wh.fence);
    await rh.release();
  });

  it('permits: 3 admits three holders across apps, the fourth waits (one key per call)', async () => {
    const services = [await locks(), await locks(), await locks(), await locks()];
    const held = await Promise.all(
      services.slice(0, 3).map((s) => s.acquire('gateway', { permits: 3, waitTimeout: 5_000 })),
    );
    expect(new Set(held.map((h) => h.fence)).size).toBe(3);
    await expect(
      services[3].acquire('gateway', { permits: 3, waitTimeout: 0 }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    const fourth = services[3].acquire('gateway', { permits: 3, waitTimeout: 10_000 });
    await waitFor(async () => (await waiting()) === 1);
    for (const h of held) await h.release();
    const h4 = await within(fourth, 10_000, 'the fourth permit');
    expect(h4.fence).toBeGreaterThan(Math.max(...held.map((h) => h.fence)));
    await h4.release();
    await expect(services[0].acquire(['a', 'b'], { permits: 2 })).rejects.toBeInstanceOf(
      LockConfigError,
    );
  });

  it('permits: holders granted at the same moment each get their own fence', async () => {
    // PostgreSQL's clock has microseconds: two sessions granted a slot in the same one read the
    // same fence. 4 apps x 20 sessions grant at once, 40 rounds: 2 runs of 3 had a duplicate
    // before the fix (the scenario test's 12 holds once in a 4-worker run).
    const services = await Promise.all(
      [1, 2, 3, 4].map(() => locks({ backend: postgresBackend({ ...pg.config, max: 20 }) })),
    );
    const fences: number[] = [];
    for (let round = 0; round < 40; round++) {
      const holds = await Promise.all(
        services.flatMap((s) =>
          Array.from({ length: 20 }, () =>
            s.acquire('burst', { permits: 1_000, waitTimeout: 10_000 }),
          ),
        ),
      );
      fences.push(...holds.map((h) => h.fence));
      await Promise.all(holds.map((h) => h.release()));
    }
    const seen = new Map<number, number>();
    for (const f of fences) seen.set(f, (seen.get(f) ?? 0) + 1);
    expect([...seen].filter(([, n]) => n > 1)).toEqual([]);
  }, 30_000);

  it('permits: 2**31 - 1 (the cost of a permit does not grow with N): holders take slots named as before', async () => {
    const huge = 2 ** 31 - 1;
    const [first, second] = [await locks(), await locks()];
    const a = await within(first.acquire('huge', { permits: huge, waitTimeout: 0 }), 20_000, 'a');
    const b = await within(second.acquire('huge', { permits: huge, waitTimeout: 0 }), 20_000, 'b');
    expect(b.fence).toBeGreaterThan(a.fence);
    // Each app starts at slot 0 (its first call): the first took it, the second walked on to
    // slot 1. A slot is the advisory lock of `<the key's lock>#permit:<slot>`, as before, so apps
    // of an older version and of this one share the same slots.
    const key = advisoryLockOf(`${prefix}huge`);
    const slot = (i: number) => advisoryLockOf(`${key}#permit:${i}`);
    expect(await heldAdvisoryLocks([slot(0), slot(1), slot(2)])).toEqual([slot(0), slot(1)]);
    await a.release();
    await b.release();
    expect(await heldAdvisoryLocks([slot(0), slot(1)])).toEqual([]);
  });

  /** The bigint advisory lock of a lock name, as PostgresDialect names it. */
  const advisoryLockOf = (name: string): string => keyDigest(name).readBigInt64BE(0).toString();

  /** Which of `locks` (bigint advisory locks) some session holds right now. */
  async function heldAdvisoryLocks(locks: string[]): Promise<string[]> {
    const rows = await pg.sql<{ k: string }>(
      `SELECT ((classid::bigint << 32) | objid::bigint)::bigint::text AS k FROM pg_locks ` +
        `WHERE locktype = 'advisory' AND granted AND objsubid = 1`,
    );
    const held = new Set(rows.map((r) => BigInt.asIntN(64, BigInt(r.k)).toString()));
    return locks.filter((l) => held.has(l));
  }

  it("leaves no lock_timeout behind on the application's pooled connection", async () => {
    const pool = new Pool({ ...pg.config, max: 1 });
    try {
      const app = await createLockApp({
        options: { backend: postgresBackend({ pool }), keyPrefix: prefix },
      });
      apps.push(app);
      const service = app.get(LockService);
      const held = await service.acquire('settings', { waitTimeout: 5_000 });
      await held.release();
      const { rows } = await pool.query<{ lock_timeout: string }>('SHOW lock_timeout');
      expect(rows[0].lock_timeout).toBe('0');
    } finally {
      await pool.end();
    }
  });

  it("waits for a full pool's connection as long as its waitTimeout, past pg's connection timeout", async () => {
    const service = await locks({ commandTimeout: 300 });
    const held = await service.acquire('queue');
    const callers = Array.from({ length: 15 }, () =>
      service
        .using('queue', () => undefined, { waitTimeout: 20_000 })
        .then(
          () => 'ok',
          (err: unknown) => String(err),
        ),
    );
    // Longer than the pool's connection timeout (commandTimeout): the callers beyond the pool
    // wait in its queue all that time.
    await new Promise((r) => setTimeout(r, 1_000));
    await held.release();
    const outcomes = await within(Promise.all(callers), 30_000, 'the callers');
    expect(outcomes.filter((o) => o !== 'ok')).toEqual([]);
  });

  it('keeps at most its pool size of connections, however many callers wait', async () => {
    const service = await locks();
    const held = await service.acquire('crowd');
    const callers = Array.from({ length: 25 }, () =>
      service.using('crowd', () => undefined, { waitTimeout: 20_000 }),
    );
    await waitFor(async () => (await waiting()) >= 9);
    const [{ n }] = await pg.sql<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'nest-locked:%'`,
    );
    expect(Number(n)).toBeLessThanOrEqual(10);
    await held.release();
    await within(Promise.all(callers), 30_000, 'the callers');
  });
});
