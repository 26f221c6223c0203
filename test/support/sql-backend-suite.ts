import type { INestApplication } from '@nestjs/common';
import {
  LockBackendError,
  LockConfigError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type LockBackendDefinition,
  type RedlockModuleOptions,
} from 'nest-locked';
import { RedlockHealthIndicator, RedlockHealthModule } from 'nest-locked/health';
import { TerminusModule } from '@nestjs/terminus';
import { createLockApp, uniquePrefix, within } from './lock-app';
import type { DatabaseServerHandle } from './database-server';
import { closedPort } from './redis-server';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';

/**
 * The behaviour every SQL backend shares (PostgreSQL, MySQL/MariaDB), run against a real server
 * by `test/integration/<backend>/*.spec.ts`: exclusion and waiting in the server's queue,
 * fences, multi-key, session loss, health, errors naming their cause, the application's pool
 * left open.
 */
export interface SqlBackendUnderTest<Server extends DatabaseServerHandle> {
  readonly name: 'postgres' | 'mysql';
  start(): Promise<Server>;
  /** The connection settings of `server` (pg PoolConfig / mysql2 PoolOptions), as JSON. */
  connection(server: Server): Record<string, unknown>;
  /** A definition over `server`, with `overrides` of the connection settings. */
  definition(server: Server, overrides?: Record<string, unknown>): LockBackendDefinition;
  /** A pool of the test's own and a definition over it, plus a check that the pool still works. */
  userPool(server: Server): {
    pool: object;
    definition: LockBackendDefinition;
    stillWorks(): Promise<boolean>;
    end(): Promise<void>;
  };
  /** Ends, on the server, the session that holds `name` (a full lock name, with its prefix). */
  killHolder(server: Server, name: string): Promise<void>;
  /** Ends the session `id` on the server (`pg_terminate_backend`, `KILL`). */
  killSession(server: Server, id: number): Promise<void>;
  /** The server's ids of the sessions waiting in its lock queue right now. */
  waiters(server: Server): Promise<number[]>;
  /** Lock requests waiting in the server's queue right now. */
  waiting(server: Server): Promise<number>;
  /** Settings naming a wrong password, an unknown database. */
  readonly wrongPassword: Record<string, unknown>;
  readonly unknownDatabase: Record<string, unknown>;
}

/**
 * The shared SQL suite over the server `serverOf` gives (started by the spec file, which adds the
 * tests of its own backend on the same server).
 */
export function describeSqlBackend<Server extends DatabaseServerHandle>(
  backend: SqlBackendUnderTest<Server>,
  serverOf: () => Server,
): void {
  let server: Server;
  const apps: INestApplication[] = [];
  const app = async (
    definition = backend.definition(server),
    options: Partial<RedlockModuleOptions> = {},
  ) => {
    const created = await createLockApp({
      options: { backend: definition, keyPrefix: prefix, ...options } as RedlockModuleOptions,
      imports: [TerminusModule, RedlockHealthModule],
    });
    apps.push(created);
    return created;
  };
  let prefix: string;

  beforeEach(() => {
    server = serverOf();
    prefix = uniquePrefix(backend.name);
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  it('excludes across two apps (two pools): the second waits in the server queue and gets a larger fence', async () => {
    const [a, b] = [(await app()).get(LockService), (await app()).get(LockService)];
    const events: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first = 0;
    const holding = a.using('k', async ({ fence }) => {
      first = fence;
      events.push('a in');
      await gate;
      events.push('a out');
    });
    await waitFor(() => events.length === 1);
    const waiting = b.using(
      'k',
      ({ fence }) => {
        events.push('b in');
        return fence;
      },
      { waitTimeout: 10_000 },
    );
    await waitFor(async () => (await b.isLocked('k')) && b.stats().queues === 1);
    release();
    await holding;
    const second = await within(waiting, 10_000, 'the waiter');
    expect(events).toEqual(['a in', 'a out', 'b in']);
    expect(second).toBeGreaterThan(first);
    expect(await a.isLocked('k')).toBe(false);
  });

  it('grants waiters of separate sessions in the order they queued (FIFO)', async () => {
    const services = await Promise.all(
      Array.from({ length: 6 }, async () => (await app()).get(LockService)),
    );
    const first = await services[0].acquire('line');
    const granted: number[] = [];
    const waits: Promise<void>[] = [];
    for (let i = 1; i < services.length; i++) {
      waits.push(
        services[i].acquire('line', { waitTimeout: 20_000 }).then((h) => {
          granted.push(i);
          return h.release();
        }),
      );
      // The next one queues only once this one waits in the server's queue.
      await waitFor(async () => (await backend.waiting(server)) === i);
    }
    await first.release();
    await within(Promise.all(waits), 20_000, 'the waiters');
    expect(granted).toEqual([1, 2, 3, 4, 5]);
  });

  it('a busy key is LockNotAcquiredError, never before waitTimeout', async () => {
    const locks = (await app()).get(LockService);
    const other = (await app()).get(LockService);
    const handle = await locks.acquire('busy');
    try {
      await expect(other.acquire('busy', { waitTimeout: 0 })).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
      const start = performance.now();
      await expect(other.acquire('busy', { waitTimeout: 300 })).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
      expect(performance.now() - start).toBeGreaterThanOrEqual(295);
    } finally {
      await handle.release();
    }
    const after = await other.acquire('busy', { waitTimeout: 0 });
    await after.release();
  });

  it('a busy try or acquire answers the lease left of a holder of its process, the ttl asked otherwise', async () => {
    const mine = await app();
    const theirs = await app();
    const backendOf = (a: INestApplication) => a.get(LockGroupRegistry).get('default');
    const handle = await mine
      .get(LockService)
      .acquire('busy-try', { ttl: 30_000, watchdog: false });
    try {
      // Held here: this process knows the lease (about 30 s left).
      const here = (await backendOf(mine).tryAcquire(['busy-try'], 1_000)) as number;
      expect(here).toBeGreaterThan(1_000);
      expect(here).toBeLessThanOrEqual(30_000);
      expect(await backendOf(mine).tryAcquireAny(['busy-try'], 1_000)).toBeGreaterThan(1_000);
      // Another process's session lock carries no lease (documented: the ttl asked).
      expect(await backendOf(theirs).tryAcquire(['busy-try'], 7_000)).toBe(7_000);
      // A busy acquire, at once or at its deadline, says the same in its LockNotAcquiredError
      // (which LockService then bounds by the usual hold of the key, if it knows one).
      for (const waitTimeout of [0, 200]) {
        const busy = backendOf(mine).acquire(['busy-try'], { ttl: 1_000, waitTimeout });
        const error = (await busy.catch((e: unknown) => e)) as LockNotAcquiredError;
        expect(error).toBeInstanceOf(LockNotAcquiredError);
        expect(error.retryAfterMs).toBeGreaterThan(1_000);
      }
    } finally {
      await handle.release();
    }
  });

  it('takes several keys all or nothing, with no deadlock between opposite orders', async () => {
    const [a, b] = [(await app()).get(LockService), (await app()).get(LockService)];
    let inside = 0;
    let overlap = false;
    const transfer = (locks: LockService, keys: string[]) =>
      locks.using(
        keys,
        async () => {
          if (++inside > 1) overlap = true;
          await new Promise((r) => setTimeout(r, 5));
          inside--;
        },
        { waitTimeout: 20_000 },
      );
    const calls: Promise<void>[] = [];
    for (let i = 0; i < 10; i++) {
      calls.push(transfer(a, ['acct:1', 'acct:2']), transfer(b, ['acct:2', 'acct:1']));
    }
    await within(Promise.all(calls), 30_000, 'the transfers');
    expect(overlap).toBe(false);
    // Nothing is left held: a try of each key alone succeeds.
    for (const key of ['acct:1', 'acct:2'])
      await (await a.acquire(key, { waitTimeout: 0 })).release();
  });

  it('the holder whose session the server ends learns it on its signal at once; the next fence is larger', async () => {
    const [a, b] = [(await app()).get(LockService), (await app()).get(LockService)];
    const lost: string[][] = [];
    a.on('lost', ({ keys }) => lost.push([...keys]));
    const handle = await a.acquire('victim', { ttl: 60_000 });
    await backend.killHolder(server, `${prefix}victim`);
    await waitFor(() => handle.signal.aborted);
    expect(handle.signal.reason).toBeInstanceOf(LockLostError);
    expect(lost).toEqual([['victim']]);
    const next = await b.acquire('victim', { waitTimeout: 5_000 });
    expect(next.fence).toBeGreaterThan(handle.fence);
    await next.release();
    await handle.release();
  });

  it('a lease left unrenewed (watchdog off) frees the key when it runs out', async () => {
    const [a, b] = [(await app()).get(LockService), (await app()).get(LockService)];
    const handle = await a.acquire('forgotten', { ttl: 300, watchdog: false });
    const next = await b.acquire('forgotten', { waitTimeout: 10_000 });
    expect(handle.signal.aborted).toBe(true);
    expect(next.fence).toBeGreaterThan(handle.fence);
    await next.release();
  });

  it('minHold keeps the key after the method returns, then frees it', async () => {
    const [a, b] = [(await app()).get(LockService), (await app()).get(LockService)];
    await a.using('cron', () => undefined, { minHold: 600 });
    await expect(b.acquire('cron', { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const later = await b.acquire('cron', { waitTimeout: 10_000 });
    await later.release();
  });

  it('reports health with latency, and down for a server that is not there', async () => {
    const up = (await app()).get(RedlockHealthIndicator);
    const result = await up.isHealthy('locks');
    expect(result.locks.status).toBe('up');
    expect(result.locks.groups.default.nodes[0].latencyMs).toBeGreaterThanOrEqual(0);
    const port = await closedPort();
    const down = (await app(backend.definition(server, { port }))).get(RedlockHealthIndicator);
    const failed = await down.isHealthy('locks');
    expect(failed.locks.status).toBe('down');
    expect(failed.locks.groups.default.nodes[0].error).toMatch(/refused/);
  });

  it('names the cause of a failure: wrong password, unknown database, refused connection', async () => {
    // The cause, and the one hint that fits it at the end of the message (a 503's log line).
    const cases: [Record<string, unknown>, RegExp, RegExp][] = [
      [backend.wrongPassword, /authentication failed/, /Check the user and password[^.]*\.$/],
      [backend.unknownDatabase, /has no database/, /fix the database name[^.]*\.$/],
      [{ port: await closedPort() }, /refused the connection/, /running and listening[^.]*\.$/],
    ];
    for (const [overrides, cause, hint] of cases) {
      const locks = (await app(backend.definition(server, overrides))).get(LockService);
      const told: unknown[] = [];
      locks.on('error', ({ error }) => told.push(error));
      const error = await locks.acquire('x', { waitTimeout: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBackendError);
      expect(told).toEqual([error]);
      expect((error as LockBackendError).failures[0].message).toMatch(cause);
      expect((error as LockBackendError).message).toMatch(hint);
      expect((error as LockBackendError).message).not.toMatch(/reachable/);
      expect((error as LockBackendError).message).not.toMatch(/\.\./);
    }
  });

  it('never closes a pool the application passed in', async () => {
    const pool = backend.userPool(server);
    try {
      const created = await app(pool.definition);
      await (await created.get(LockService).acquire('mine')).release();
      await created.close();
      apps.splice(apps.indexOf(created), 1);
      expect(await pool.stillWorks()).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it('refuses a pool together with connection settings, and a pool that is none', async () => {
    const user = backend.userPool(server);
    try {
      expect(() => backend.definition(server, { pool: user.pool })).toThrow(LockConfigError);
      expect(() => backend.definition(server, { pool: {} })).toThrow(LockConfigError);
    } finally {
      await user.end();
    }
  });
}

/** Polls `condition` until it holds (10 s at most). */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  ms = 10_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
