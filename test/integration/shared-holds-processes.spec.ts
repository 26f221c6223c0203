import type { INestApplication } from '@nestjs/common';
import { LockService } from 'nest-locked';
import type {
  HoldShareScenario,
  MixScenario,
  ReaderStreamScenario,
  SharedLine,
  SharedWorkerConfig,
} from '../fixtures/shared-worker';
import {
  describeOverlaps,
  findOverlaps,
  type Interval,
  maxConcurrency,
} from '../support/intervals';
import { createLockApp, sleep, uniquePrefix, within } from '../support/lock-app';
import {
  type RedisServerHandle,
  startRedisServers,
  stopAll,
  useRedis,
} from '../support/redis-server';
import { killWorkers, spawnWorker, type Worker, type WorkerResult } from '../support/workers';

/**
 * Read/write locks and permits (PRODUCT.md 2.7) across 4 OS processes (test/fixtures/
 * shared-worker), checked by the independent interval checker: no read hold overlaps a write
 * hold of the key, read holds do overlap, permits never exceed N and reach it, fences of writers
 * and permits are unique and follow the order of the holds; a writer gets in under a stream of
 * readers; a SIGKILLed reader or permit holder frees its share within its ttl. Single node and a
 * 3-server quorum.
 */
jest.setTimeout(90_000);

const PROCESSES = 4;

type Hold = Extract<SharedLine, { type: 'hold' }>;

afterAll(() => killWorkers());

/** Runs one worker per config, started together; every line of all of them. */
async function runAll(configs: SharedWorkerConfig[]): Promise<WorkerResult<SharedLine>[]> {
  const workers = configs.map((c) =>
    spawnWorker<SharedWorkerConfig, SharedLine>(c, 'shared-worker'),
  );
  await Promise.all(workers.map((w) => w.ready));
  workers.forEach((w) => w.go());
  return Promise.all(workers.map((w) => w.exited));
}

const holdsOf = (results: WorkerResult<SharedLine>[]): Hold[] =>
  results.flatMap((r) => r.lines.filter((l): l is Hold => l.type === 'hold'));

const errorsOf = (results: WorkerResult<SharedLine>[]) =>
  results.flatMap((r) => r.lines.filter((l) => l.type === 'error'));

function expectClean(results: WorkerResult<SharedLine>[]): void {
  expect(errorsOf(results)).toEqual([]);
  for (const r of results)
    expect({ code: r.code, other: r.code ? r.other : '' }).toEqual({ code: 0, other: '' });
}

/**
 * Pairs out of fence order: a hold that ended before another was even asked for (so the other
 * was taken after it, in any process) with a fence at least as large. For exclusive holds,
 * `after: 'start'` (a hold that ended before the other started) is already that.
 */
function fenceInversions(holds: readonly Hold[], after: 'start' | 'askedAt'): string[] {
  const out: string[] = [];
  for (const a of holds) {
    for (const b of holds) {
      if (a !== b && a.end <= b[after] && a.fence >= b.fence) {
        out.push(`${a.kind} fence ${a.fence} ended before ${b.kind} fence ${b.fence} was asked`);
      }
    }
  }
  return out;
}

/** Checks a read/write run: exclusion, shared reads, fences. */
function checkReadWrite(holds: Hold[], expected: number): void {
  expect(holds).toHaveLength(expected);
  const writes = holds.filter((h) => h.kind === 'write');
  const reads = holds.filter((h) => h.kind === 'read');
  expect(writes.length).toBeGreaterThan(0);
  // No write overlaps anything else of the key (reads or writes).
  const tagged: Interval[] = holds.map((h) => ({
    ...h,
    by: `${h.kind}@${h.pid} fence ${h.fence}`,
  }));
  const bad = findOverlaps(tagged).filter(
    ([x, y]) => `${x.by}`.startsWith('write') || `${y.by}`.startsWith('write'),
  );
  expect(describeOverlaps(bad)).toBe('');
  // Read holds do share the key.
  expect(maxConcurrency(reads)).toBeGreaterThan(1);
  // Writers: unique fences, in the order of the holds.
  expect(new Set(writes.map((w) => w.fence)).size).toBe(writes.length);
  expect(fenceInversions(writes, 'start')).toEqual([]);
  // A reader sees the last writer's version: at least the fence of every write that ended before
  // it started, below the fence of every write that started after it ended.
  for (const r of reads) {
    for (const w of writes) {
      if (w.end <= r.start) expect(r.fence).toBeGreaterThanOrEqual(w.fence);
      if (r.end <= w.start) expect(r.fence).toBeLessThan(w.fence);
    }
  }
}

function checkPermits(holds: Hold[], expected: number, permits: number): void {
  expect(holds).toHaveLength(expected);
  expect(maxConcurrency(holds)).toBe(permits);
  expect(new Set(holds.map((h) => h.fence)).size).toBe(holds.length);
  expect(fenceInversions(holds, 'askedAt')).toEqual([]);
}

function describeSuite(name: string, servers: () => Promise<RedisServerHandle[]>, scale: number) {
  describe(name, () => {
    let nodes: RedisServerHandle[] = [];
    let clients: string[];
    const prefix = () => uniquePrefix('shp');

    beforeAll(async () => {
      nodes = await servers();
      clients = nodes.map((n) => n.url);
    });
    afterAll(async () => {
      await killWorkers();
      await stopAll(nodes);
    });

    const mix = (keyPrefix: string, extra: Partial<MixScenario>): MixScenario => ({
      scenario: 'mix',
      clients,
      keyPrefix,
      timeoutMs: 80_000,
      waitTimeout: 60_000,
      key: 'rw',
      calls: 40 * scale,
      concurrency: 4,
      writeEvery: 4,
      minMs: 2,
      maxMs: 6,
      ...extra,
    });

    it(`read and write holds across ${PROCESSES} processes: no read overlaps a write, reads overlap, fences in order`, async () => {
      const keyPrefix = prefix();
      const results = await runAll(Array.from({ length: PROCESSES }, () => mix(keyPrefix, {})));
      expectClean(results);
      checkReadWrite(holdsOf(results), PROCESSES * 40 * scale);
    });

    it(`permits of 3 across ${PROCESSES} processes: never more than 3 at once, 3 reached, unique fences in order`, async () => {
      const keyPrefix = prefix();
      const results = await runAll(
        Array.from({ length: PROCESSES }, () =>
          mix(keyPrefix, { permits: 3, key: 'gateway', calls: 30 * scale, concurrency: 3 }),
        ),
      );
      expectClean(results);
      checkPermits(holdsOf(results), PROCESSES * 30 * scale, 3);
    });

    it('a writer waiting under a continuous stream of readers from 3 processes gets in after the readers ahead of it', async () => {
      const streamPrefix = prefix();
      const stream = (writer: boolean): ReaderStreamScenario => ({
        scenario: 'readers',
        clients,
        keyPrefix: streamPrefix,
        timeoutMs: 30_000,
        key: 'catalog',
        concurrency: 3,
        holdMs: 60,
        writer: writer ? { afterMs: 400 } : undefined,
      });
      const workers = [stream(true), stream(false), stream(false)].map((c) =>
        spawnWorker<ReaderStreamScenario, SharedLine>(c, 'shared-worker'),
      );
      await Promise.all(workers.map((w) => w.ready));
      workers.forEach((w) => w.go());
      const wrote = await within(nextLine(workers[0], 'wrote'), 10_000, 'the write');
      // The readers that held or were granted before the writer queued are ahead of it (each reads
      // 60 ms); none that came later. A bound far above that, far below starvation.
      expect(wrote.at - wrote.askedAt).toBeLessThan(2_000);
      await sleep(200); // readers go on after the write
      workers.forEach((w) => w.send('stop'));
      const results = await Promise.all(workers.map((w) => w.exited));
      expectClean(results);
      const holds = holdsOf(results);
      const write = holds.filter((h) => h.kind === 'write');
      expect(write).toHaveLength(1);
      const reads = holds.filter((h) => h.kind === 'read');
      // The key was never free of readers before the write, and readers came back after it.
      expect(reads.some((r) => r.start > write[0].end)).toBe(true);
      expect(maxConcurrency(reads)).toBeGreaterThan(1);
      const overlapping = reads.filter((r) => r.start < write[0].end && write[0].start < r.end);
      expect(overlapping).toEqual([]);
    });
  });
}

describeSuite('single node', async () => [await useRedis()], 1);
describeSuite('quorum of 3 servers', () => startRedisServers(3), 0.5);

describe('liveness and dead holders (single node)', () => {
  let server: RedisServerHandle;
  let app: INestApplication;
  let locks: LockService;
  let keyPrefix: string;

  beforeAll(async () => {
    server = await useRedis();
  });
  beforeEach(async () => {
    keyPrefix = uniquePrefix('shl');
    app = await createLockApp({ options: { clients: [server.url], keyPrefix } });
    locks = app.get(LockService);
  });
  afterEach(async () => {
    await killWorkers();
    await app.close();
  });
  afterAll(() => stopAll([server]));

  it.each([
    ['a reader', undefined],
    ['a permit holder', 2],
  ] as const)('%s SIGKILLed: its share frees within its ttl', async (_label, permits) => {
    const TTL = 1_500;
    const config: HoldShareScenario = {
      scenario: 'holdShare',
      clients: [server.url],
      keyPrefix,
      timeoutMs: 30_000,
      ttl: TTL,
      key: 'share',
      permits,
    };
    const holder = spawnWorker<HoldShareScenario, SharedLine>(config, 'shared-worker');
    await holder.ready;
    holder.go();
    const acquired = await within(nextLine(holder, 'acquired'), 10_000, 'the share');
    // With permits: the other permit is ours, so the key is full.
    const mine = permits ? await locks.acquire('share', { permits, ttl: 10_000 }) : undefined;
    await sleep(TTL / 3 + 200); // past a renewal
    const asking = permits ? { permits, waitTimeout: 3 * TTL } : { waitTimeout: 3 * TTL };
    const killedAt = performance.now();
    holder.kill();
    const taken = await locks.acquire('share', asking);
    const tookMs = performance.now() - killedAt;
    expect(tookMs).toBeLessThanOrEqual(TTL + 500);
    if (permits) expect(taken.fence).toBeGreaterThan(Math.max(acquired.fence, mine!.fence));
    else expect(taken.fence).toBeGreaterThan(acquired.fence);
    await taken.release();
    await mine?.release();
  });
});

function nextLine<T extends SharedLine['type']>(
  worker: Worker<SharedLine>,
  type: T,
): Promise<Extract<SharedLine, { type: T }>> {
  const seen = worker.lines.find((l) => l.type === type);
  if (seen) return Promise.resolve(seen as Extract<SharedLine, { type: T }>);
  return new Promise((resolve) =>
    worker.onLine((l) => l.type === type && resolve(l as Extract<SharedLine, { type: T }>)),
  );
}
