import type { INestApplication } from '@nestjs/common';
import {
  LockBackendError,
  LockConfigError,
  type LockHandle,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type RedlockModuleOptions,
} from 'nest-locked';
import {
  CONTRACT_BACKENDS,
  CONTRACT_CASES,
  type ContractBackend,
  type ContractCase,
  type ContractServer,
} from '../../support/contract-backends';
import { createLockApp, uniquePrefix, until, within } from '../../support/lock-app';

/**
 * The contract every backend keeps (`lib/core/lock-backend.ts`), one case at a time against each
 * backend of `CONTRACT_BACKENDS`, through the public API: apps of `RedlockModule` over one
 * server are the processes (memory: one app). The file ends by printing the table backend x
 * case (pass, fail, n/a, or a known drift still there).
 */

jest.setTimeout(30_000);

type Cell = 'pass' | 'bound' | 'FAIL' | 'n/a' | 'drift' | 'DRIFT FIXED';
const table = new Map<string, Map<ContractCase, Cell>>();

/** Whether `name` applies to `backend`, or why not. */
function applies(backend: ContractBackend, name: ContractCase): true | string {
  const { read, permits } = backend.supports;
  switch (name) {
    case 'unreachable':
      return backend.oneProcess ? 'no server' : true;
    case 'read fence':
    case 'read/write':
      return read || 'no read locks';
    case 'permits':
      return permits || 'no permits';
    case 'share mismatch':
      return (read && permits) || 'no read locks or permits';
    case 'unsupported share':
      return !read || !permits || 'supports both';
    default:
      return true;
  }
}

afterAll(() => {
  const names = [...table.keys()];
  const width = Math.max(...CONTRACT_CASES.map((c) => c.length));
  const rows = CONTRACT_CASES.map(
    (c) =>
      `| ${c.padEnd(width)} | ${names.map((n) => (table.get(n)?.get(c) ?? '-').padEnd(n.length)).join(' | ')} |`,
  );
  const header = `| ${'case'.padEnd(width)} | ${names.join(' | ')} |`;
  const rule = `|${'-'.repeat(width + 2)}|${names.map((n) => '-'.repeat(n.length + 2)).join('|')}|`;
  const bounds = CONTRACT_BACKENDS.filter((b) => b.busyAnswerBound).map(
    (b) => `bound (${b.name}): at most ${b.busyAnswerBound?.ms} ms, ${b.busyAnswerBound?.why}`,
  );
  const lines = [header, rule, ...rows, '', ...bounds];
  process.stdout.write(`\nThe backend contract:\n${lines.join('\n')}\n`);
});

/** Resolves once `locks` takes `key` with a try (and lets it go), within `until`'s 5 s. */
function untilFree(locks: LockService, key: string, what: string): Promise<void> {
  return until(
    () =>
      locks.acquire(key, { waitTimeout: 0 }).then(
        async (h) => (await h.release(), true),
        (e: unknown) => (e instanceof LockNotAcquiredError ? false : Promise.reject(e)),
      ),
    what,
  );
}

describe.each(CONTRACT_BACKENDS.map((b) => [b.name, b] as const))('%s', (_, backend) => {
  const cells = new Map<ContractCase, Cell>();
  table.set(backend.name, cells);
  let server: ContractServer;
  let prefix: string;
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    server = await backend.start();
  }, 60_000);
  beforeEach(() => {
    prefix = uniquePrefix('contract');
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  afterAll(() => server?.stop());

  /** A lock service of its own app over the backend (`options` over the server's). */
  async function service(options: Partial<RedlockModuleOptions> = {}): Promise<LockService> {
    const app = await createLockApp({
      options: { ...server.options, keyPrefix: prefix, ...options } as RedlockModuleOptions,
    });
    apps.push(app);
    return app.get(LockService);
  }

  /** `n` processes' lock services (one service n times for a backend of one process). */
  async function processes(n: number): Promise<LockService[]> {
    if (backend.oneProcess) return Array<LockService>(n).fill(await service());
    return Promise.all(Array.from({ length: n }, () => service()));
  }

  /** The case `name`, recorded in the table; a known drift runs as `it.failing`. */
  function contractCase(name: ContractCase, body: () => Promise<void>): void {
    const why = applies(backend, name);
    if (why !== true) {
      cells.set(name, 'n/a');
      return;
    }
    const drift = backend.knownDrift?.[name];
    const run = async () => {
      try {
        await body();
      } catch (error) {
        cells.set(name, drift ? 'drift' : 'FAIL');
        throw error;
      }
      const bounded = name === 'busy answer' && backend.busyAnswerBound;
      cells.set(name, drift ? 'DRIFT FIXED' : bounded ? 'bound' : 'pass');
    };
    if (drift) it.failing(`${name} (known drift: ${drift})`, run);
    else it(name, run);
  }

  contractCase('exclusion and fences', async () => {
    const services = await processes(3);
    let inside = 0;
    let overlaps = 0;
    const fences: number[] = [];
    const calls = Array.from({ length: 12 }, (_, i) =>
      services[i % 3].using(
        'k',
        async ({ fence }) => {
          if (++inside > 1) overlaps++;
          fences.push(fence);
          await new Promise((r) => setTimeout(r, 2));
          inside--;
        },
        { waitTimeout: 20_000 },
      ),
    );
    await within(Promise.all(calls), 25_000, 'the contending calls');
    expect(overlaps).toBe(0);
    expect(fences).toHaveLength(12);
    // Strictly increasing in the order the holds began.
    expect(fences).toEqual([...new Set(fences)].sort((x, y) => x - y));
  });

  contractCase('waits, then busy', async () => {
    const [a, b] = await processes(2);
    const held = await a.acquire('k');
    const started = performance.now();
    const error = await b.acquire('k', { waitTimeout: 300 }).catch((e: unknown) => e);
    const waited = performance.now() - started;
    await held.release();
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    // Never before waitTimeout (a timer runs on the event loop's clock, which may lag the one
    // read here by a few ms).
    expect(waited).toBeGreaterThanOrEqual(295);
  });

  contractCase('unreachable', async () => {
    const locks = await service({ ...(await server.unreachable!()), commandTimeout: 500 });
    // A waiter may ride a blip out to its deadline; then it fails as an outage, not as busy.
    const error = await locks.acquire('k', { waitTimeout: 500 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockBackendError);
    expect(error).not.toBeInstanceOf(LockNotAcquiredError);
    expect((error as Error).message).toContain(`${backend.system} failed (`);
  });

  contractCase('read fence', async () => {
    const [a, b, c] = await processes(3);
    const first = await a.acquire('k');
    await first.release();
    const [r1, r2] = [
      await b.acquire('k', { mode: 'read' }),
      await c.acquire('k', { mode: 'read' }),
    ];
    await Promise.all([r1.release(), r2.release()]);
    const next = await a.acquire('k');
    await next.release();
    // The key's current fence: at least the last writer's, below the next writer's.
    for (const read of [r1, r2]) {
      expect(read.fence).toBeGreaterThanOrEqual(first.fence);
      expect(read.fence).toBeLessThan(next.fence);
    }
  });

  contractCase('multi-key', async () => {
    const [a, b] = await processes(2);
    const y = await b.acquire('y');
    await expect(a.acquire(['x', 'y'], { waitTimeout: 200 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    // Nothing of the failed call stays: x is free (at once, or soon: etcd deletes the waiter's
    // own key of x after the call rejected).
    await untilFree(b, 'x', 'x free after the failed call');
    await y.release();
    // Opposite orders from two processes, many times: all or nothing, no deadlock, no overlap.
    let inside = 0;
    let overlaps = 0;
    const calls = Array.from({ length: 20 }, (_, i) =>
      (i % 2 ? a : b).using(
        i % 2 ? ['x', 'y'] : ['y', 'x'],
        async () => {
          if (++inside > 1) overlaps++;
          await new Promise((r) => setImmediate(r));
          inside--;
        },
        { waitTimeout: 20_000 },
      ),
    );
    await within(Promise.all(calls), 25_000, 'the crossing multi-key calls');
    expect(overlaps).toBe(0);
  });

  contractCase('read/write', async () => {
    const [a, b, c, d] = await processes(4);
    const reads = [await a.acquire('k', { mode: 'read' }), await b.acquire('k', { mode: 'read' })];
    await expect(c.acquire('k', { waitTimeout: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError);
    const events: string[] = [];
    const writing = c.acquire('k', { waitTimeout: 10_000 }).then((w) => (events.push('write'), w));
    // Once the writer waits in line, a later reader does not overtake it.
    await until(
      () =>
        d.acquire('k', { mode: 'read', waitTimeout: 0 }).then(
          async (h) => (await h.release(), false),
          (e: unknown) => e instanceof LockNotAcquiredError,
        ),
      'a reader refused behind the waiting writer',
    );
    const reading = d
      .acquire('k', { mode: 'read', waitTimeout: 10_000 })
      .then((r) => (events.push('read'), r));
    await Promise.all(reads.map((r) => r.release()));
    const write = await within(writing, 10_000, 'the writer');
    expect(events).toEqual(['write']);
    expect(write.fence).toBeGreaterThan(Math.max(...reads.map((r) => r.fence)));
    await write.release();
    const read = await within(reading, 10_000, 'the reader behind the writer');
    expect(events).toEqual(['write', 'read']);
    expect(read.fence).toBeGreaterThanOrEqual(write.fence);
    await read.release();
  });

  contractCase('permits', async () => {
    const [a, b, c] = await processes(3);
    const held = [await a.acquire('p', { permits: 2 }), await b.acquire('p', { permits: 2 })];
    await expect(c.acquire('p', { permits: 2, waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const third = c.acquire('p', { permits: 2, waitTimeout: 10_000 });
    // Any permit given back admits the next holder.
    await held[1].release();
    const admitted = await within(third, 10_000, 'the third holder');
    // Each permit its own fence, the later one above the earlier ones.
    expect(admitted.fence).toBeGreaterThan(Math.max(...held.map((h) => h.fence)));
    expect(held[1].fence).not.toBe(held[0].fence);
    await Promise.all([held[0].release(), admitted.release()]);
  });

  contractCase('share mismatch', async () => {
    const [a, b] = await processes(2);
    const held = await a.acquire('m', { permits: 3 });
    await expect(b.acquire('m', { mode: 'read', waitTimeout: 2_000 })).rejects.toBeInstanceOf(
      LockConfigError,
    );
    await expect(b.acquire('m', { permits: 2, waitTimeout: 2_000 })).rejects.toBeInstanceOf(
      LockConfigError,
    );
    await held.release();
    // The refused calls left nothing that holds the key.
    await (await b.acquire('m', { waitTimeout: 0 })).release();
  });

  contractCase('unsupported share', async () => {
    const [a] = await processes(1);
    if (!backend.supports.read)
      await expect(a.acquire('u', { mode: 'read' })).rejects.toBeInstanceOf(LockConfigError);
    if (!backend.supports.permits)
      await expect(a.acquire('u', { permits: 2 })).rejects.toBeInstanceOf(LockConfigError);
  });

  contractCase('lease ends', async () => {
    const [a, b] = await processes(2);
    const asked = performance.now();
    const forgotten = await a.acquire('l', { ttl: 300, watchdog: false });
    const next = await b.acquire('l', { waitTimeout: 10_000 });
    // Not before its ttl (less the 1% drift, and a few ms of the event loop's clock), then to a
    // larger fence; the lost holder is told.
    expect(performance.now() - asked).toBeGreaterThanOrEqual(300 * 0.99 - 5);
    expect(next.fence).toBeGreaterThan(forgotten.fence);
    await until(() => forgotten.signal.aborted, 'the lost holder told');
    await expect(forgotten.extend(5_000)).rejects.toBeInstanceOf(LockLostError);
    await next.release();
  });

  contractCase('extend', async () => {
    const [a, b] = await processes(2);
    const held = await a.acquire('e', { ttl: 1_000, watchdog: false });
    await held.extend(20_000);
    // Past its first ttl, the key is still held.
    await expect(b.acquire('e', { waitTimeout: 1_200 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    expect(held.signal.aborted).toBe(false);
    await held.release();
  });

  contractCase('release', async () => {
    const [a, b] = await processes(2);
    // A lease far past the waiter's deadline: only the release can let it in.
    const held = await a.acquire('r', { ttl: 60_000 });
    let next: LockHandle | undefined;
    const waiting = b.acquire('r', { waitTimeout: 10_000 }).then((h) => (next = h));
    await until(() => b.stats().queues > 0, 'the waiter in line');
    expect(next).toBeUndefined();
    await held.release();
    await within(waiting, 10_000, 'the waiter');
    expect(next!.fence).toBeGreaterThan(held.fence);
    await next!.release();
  });

  contractCase('abort', async () => {
    const [a, b] = await processes(2);
    const held = await a.acquire('s', { ttl: 60_000 });
    const waitFor = (signal: AbortSignal) =>
      b.acquire('s', { waitTimeout: 20_000, signal }).catch((e: unknown) => e);
    // Aborted at once: while the call still enters the line (its first round trip).
    const entering = new AbortController();
    const first = waitFor(entering.signal);
    entering.abort(new Error('gave up entering'));
    expect(await within(first, 5_000, 'the wait aborted while entering')).toMatchObject({
      message: 'gave up entering',
    });
    // Aborted in line.
    const queued = new AbortController();
    const second = waitFor(queued.signal);
    await until(() => b.stats().queues > 0, 'the waiter in line');
    queued.abort(new Error('gave up in line'));
    expect(await within(second, 5_000, 'the wait aborted in line')).toMatchObject({
      message: 'gave up in line',
    });
    // Nothing of either stays: once the holder releases, the key is free (at once, or once
    // the server has deleted an aborted waiter's entry).
    await held.release();
    await untilFree(b, 's', 'the key free');
  });

  contractCase('busy answer', async () => {
    const [a, b] = await processes(2);
    // Renewed by the watchdog: the holder's lease left stays within 900 ms.
    const held = await a.acquire('b', { ttl: 900 });
    const error = await b.acquire('b', { ttl: 30_000, waitTimeout: 0 }).catch((e: unknown) => e);
    await held.release();
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    // The holder's lease left, not the ttl the busy caller asked; or the backend's documented
    // bound where the server keeps no lease of another process's hold.
    const bound = backend.busyAnswerBound?.ms ?? 900;
    expect((error as LockNotAcquiredError).retryAfterMs).toBeLessThanOrEqual(bound);
  });
});
