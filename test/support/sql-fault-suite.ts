import type { INestApplication } from '@nestjs/common';
import {
  LockBackendError,
  type LockHandle,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type RedlockModuleOptions,
} from 'nest-locked';
import type { SqlHolderConfig } from '../fixtures/sql-holder';
import type { DatabaseServerHandle } from './database-server';
import { describeOverlaps, findOverlaps, type Interval, now } from './intervals';
import { createLockApp, uniquePrefix, within } from './lock-app';
import { type SqlBackendUnderTest, waitFor } from './sql-backend-suite';
import { killWorkers, spawnWorker } from './workers';

/** The holder's one line: it holds the key, under this fence. */
interface HolderLine {
  type: 'ready';
  fence: number;
}

const COMMAND_TIMEOUT = 1_000;

/**
 * The faults every SQL backend must survive (test/faults/<backend>-faults.spec.ts): a holder
 * process SIGKILLed, its session killed on the server, the server restarted under load, the
 * server frozen (SIGSTOP). Every wait is bounded; the numbers measured are printed once at the
 * end (`[sql faults] ...`) for the record.
 */
export function describeSqlFaults<Server extends DatabaseServerHandle>(
  backend: SqlBackendUnderTest<Server>,
): void {
  let server: Server;
  let prefix: string;
  const apps: INestApplication[] = [];
  const measured: Record<string, number | string> = {};
  const locks = async (options: Partial<RedlockModuleOptions> = {}): Promise<LockService> => {
    const app = await createLockApp({
      options: {
        backend: backend.definition(server),
        keyPrefix: prefix,
        commandTimeout: COMMAND_TIMEOUT,
        ...options,
      } as RedlockModuleOptions,
    });
    apps.push(app);
    return app.get(LockService);
  };

  beforeAll(async () => {
    server = await backend.start();
  }, 60_000);
  beforeEach(() => (prefix = uniquePrefix(`${backend.name}-f`)));
  afterEach(async () => {
    server?.signal('SIGCONT');
    await killWorkers();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await server?.stop();
    process.stdout.write(`[sql faults] ${backend.name} ${JSON.stringify(measured)}\n`);
  });

  it('a holder process SIGKILLed frees the lock at once: the waiter gets it, with a larger fence', async () => {
    const config: SqlHolderConfig = {
      kind: backend.name,
      connection: backend.connection(server),
      keyPrefix: prefix,
      key: 'killed',
      timeoutMs: 120_000,
    };
    const holder = spawnWorker<SqlHolderConfig, HolderLine>(config, 'sql-holder');
    await within(holder.ready, 60_000, 'the holder process');
    const acquired = holder.lines.find((l) => l.type === 'ready')!.fence;
    const service = await locks();
    const waiter = service.acquire('killed', { waitTimeout: 30_000, ttl: 30_000 });
    await waitFor(async () => (await backend.waiting(server)) === 1);
    const killedAt = performance.now();
    holder.kill();
    const handle = await within(waiter, 30_000, 'the waiter');
    measured.sigkillToGrantMs = Math.round(performance.now() - killedAt);
    expect(handle.fence).toBeGreaterThan(acquired);
    // "At once": nowhere near the lease (30 s) a crashed Redis holder would leave behind.
    expect(performance.now() - killedAt).toBeLessThan(10_000);
    await handle.release();
  }, 90_000);

  it("the holder's session killed on the server aborts its signal; the next holder's fence is larger", async () => {
    const [a, b] = [await locks(), await locks()];
    const handle = await a.acquire('victim', { ttl: 60_000 });
    const killedAt = performance.now();
    await backend.killHolder(server, `${prefix}victim`);
    await waitFor(() => handle.signal.aborted);
    measured.sessionKillToAbortMs = Math.round(performance.now() - killedAt);
    expect(handle.signal.reason).toBeInstanceOf(LockLostError);
    const next = await b.acquire('victim', { waitTimeout: 5_000 });
    expect(next.fence).toBeGreaterThan(handle.fence);
    await next.release();
  });

  it('a waiter with time left rides through a server restart and gets the lock after', async () => {
    const [a, b] = [await locks(), await locks()];
    const held = await a.acquire('blip', { ttl: 60_000 });
    const waiter = b.acquire('blip', { waitTimeout: 60_000, ttl: 10_000 });
    await waitFor(async () => (await backend.waiting(server)) === 1);
    await server.restart();
    // The holder's session ended with the server: its hold is over; the waiter's wait goes on.
    await waitFor(() => held.signal.aborted, 10_000);
    const handle = await within(waiter, 60_000, 'the waiter');
    expect(await a.isLocked('blip')).toBe(true);
    await handle.release();
  }, 90_000);

  it('a caller that starts waiting while the server is down gets the lock once it is back', async () => {
    const b = await locks();
    await server.down();
    let waiter: Promise<LockHandle>;
    try {
      waiter = b.acquire('later', { waitTimeout: 60_000 });
      waiter.catch(() => undefined);
    } finally {
      await server.up();
    }
    const handle = await within(waiter, 60_000, 'the waiter');
    await handle.release();
  }, 90_000);

  it('a waiter whose waiting session is killed on the server queues again, and gets the lock once it is freed', async () => {
    const [a, b] = [await locks(), await locks()];
    const held = await a.acquire('kicked', { ttl: 60_000 });
    let failed: unknown;
    const waiter = b.acquire('kicked', { waitTimeout: 60_000 });
    waiter.catch((error: unknown) => (failed = error));
    await waitFor(async () => (await backend.waiters(server)).length === 1);
    const [killed] = await backend.waiters(server);
    await backend.killSession(server, killed);
    // Back in the server's queue on a new session (or failed: the defect).
    await waitFor(
      async () =>
        failed !== undefined || (await backend.waiters(server)).some((id) => id !== killed),
      20_000,
    );
    expect(failed).toBeUndefined();
    expect(held.signal.aborted).toBe(false);
    await held.release();
    const handle = await within(waiter, 30_000, 'the waiter');
    expect(handle.fence).toBeGreaterThan(held.fence);
    await handle.release();
  }, 60_000);

  it('a waiter whose deadline passes while the server is down fails with LockBackendError, with the cause', async () => {
    const [a, b] = [await locks(), await locks()];
    await a.acquire('down', { ttl: 60_000 });
    const waiter = b.acquire('down', { waitTimeout: 1_500 }).catch((error: unknown) => error);
    await waitFor(async () => (await backend.waiting(server)) === 1);
    await server.down();
    try {
      const error = await within(waiter, 30_000, 'the waiter');
      expect(error).toBeInstanceOf(LockBackendError);
      expect((error as LockBackendError).cause).toBeInstanceOf(Error);
      expect((error as LockBackendError).message).not.toMatch(/held by another caller/);
    } finally {
      await server.up();
    }
  }, 60_000);

  it('a restart under load: waiters ride through it, then recovery without an app restart and no overlap', async () => {
    const services = [await locks(), await locks()];
    const intervals: Interval[] = [];
    let counter = 0;
    let written = 0;
    const errors = { backend: 0, busy: 0, other: [] as string[] };
    let restartedAt = Infinity;
    let okAfterRestart = 0;
    let stop = false;
    const loop = async (service: LockService, by: number) => {
      for (let calls = 0; !stop && calls < 5_000; calls++) {
        try {
          await service.using(
            'hot',
            async ({ signal, fence }) => {
              const start = now();
              const read = counter;
              await new Promise((r) => setTimeout(r, 2));
              // Acts only while it holds the lock: a holder told it lost it stops here.
              if (signal.aborted) return;
              counter = read + 1;
              written++;
              intervals.push({ key: 'hot', start, end: now(), fence, by });
            },
            { waitTimeout: 2_000 },
          );
          if (performance.now() > restartedAt) okAfterRestart++;
        } catch (err) {
          if (err instanceof LockBackendError) errors.backend++;
          else if (err instanceof LockNotAcquiredError) errors.busy++;
          else errors.other.push(String(err));
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const loops = services.flatMap((s, i) => [loop(s, i), loop(s, i + 10)]);
    await waitFor(() => written >= 20, 20_000);
    const restartStart = performance.now();
    await server.restart();
    restartedAt = performance.now();
    measured.restartMs = Math.round(restartedAt - restartStart);
    await waitFor(() => okAfterRestart >= 20, 30_000);
    measured.recoveredAfterRestartMs = Math.round(performance.now() - restartedAt);
    stop = true;
    await within(Promise.all(loops), 30_000, 'the load loops');
    measured.restartBackendErrors = errors.backend;
    // Waiters with time left ride through the restart (see the test above); a caller whose
    // wait ran out while the server was down got a LockBackendError (counted, not asserted:
    // how many depends on how long the restart took).
    expect(errors.other).toEqual([]);
    expect(findOverlaps(intervals).length === 0 || describeOverlaps(findOverlaps(intervals))).toBe(
      true,
    );
    expect(counter).toBe(written);
  }, 90_000);

  it('a frozen server (SIGSTOP): no caller hangs past waitTimeout + commandTimeout', async () => {
    const [a, b] = [await locks(), await locks()];
    const held = await a.acquire('frozen', { ttl: 3_000 });
    const waitTimeout = 1_500;
    const bound = waitTimeout + COMMAND_TIMEOUT;
    server.signal('SIGSTOP');
    try {
      const started = performance.now();
      const settled = await Promise.all(
        [
          b.acquire('frozen', { waitTimeout }),
          b.acquire('other', { waitTimeout }),
          b.isLocked('frozen'),
          held.extend(3_000),
        ].map((call) =>
          call.then(
            () => ({ ok: true, ms: performance.now() - started }),
            (error: unknown) => ({ ok: false, error, ms: performance.now() - started }),
          ),
        ),
      );
      measured.frozenLongestCallMs = Math.round(Math.max(...settled.map((s) => s.ms)));
      // No answer in time: the hint says so, not "reachable".
      const waited = String((settled[0] as { error?: Error }).error?.message);
      expect(waited).toMatch(/did not answer/);
      expect(waited).toMatch(/commandTimeout[^.]*\.$/);
      for (const s of settled) {
        expect(s.ok).toBe(false);
        // A little slack for a loaded machine's timers, never a hang.
        expect(s.ms).toBeLessThan(bound + 1_000);
      }
      // The holder is told once its lease runs out unrenewed.
      await waitFor(() => held.signal.aborted, 10_000);
    } finally {
      server.signal('SIGCONT');
    }
    // Thawed: locks work again, without an app restart.
    const after = await b.acquire('frozen', { waitTimeout: 15_000 });
    await after.release();
  }, 60_000);
}
