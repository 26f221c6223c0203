import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockContext, Locked } from 'nest-locked';
import type { CounterScenario } from '../fixtures/lock-worker';
import {
  byKey,
  describeOverlaps,
  findOverlaps,
  type Interval,
  maxConcurrency,
  maxConcurrencyPerKey,
  now,
} from '../support/intervals';
import { createLockApp, sleep, uniquePrefix } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { describeResult, linesOf, runWorkers } from '../support/workers';

jest.setTimeout(60_000);

const PROCESSES = 4;
const CALLS = 25;

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

function counterRun(locked: boolean, names: string[]): CounterScenario[] {
  const id = randomBytes(4).toString('hex');
  return Array.from({ length: PROCESSES }, () => ({
    scenario: 'counter',
    clients: [server.url],
    keyPrefix: `mx:${id}:`,
    dataUrl: server.url,
    dataPrefix: `mx:${id}:data:`,
    timeoutMs: 45_000,
    waitTimeout: 40_000,
    names,
    calls: CALLS,
    delayMs: 3,
    locked,
  }));
}

describe('the interval checker', () => {
  it('finds an overlap it is fed, and none in touching or separate intervals', () => {
    const ok: Interval[] = [
      { key: 'k', start: 0, end: 10 },
      { key: 'k', start: 10, end: 20 },
      { key: 'k', start: 25, end: 30 },
      { key: 'other', start: 5, end: 15 },
    ];
    expect(findOverlaps(ok)).toEqual([]);
    expect(maxConcurrencyPerKey(ok)).toBe(1);
    expect(maxConcurrency(ok)).toBe(2);

    const bad: Interval[] = [...ok, { key: 'k', start: 19.999, end: 22 }];
    const overlaps = findOverlaps(bad);
    expect(overlaps).toHaveLength(1);
    expect(overlaps[0][0]).toMatchObject({ key: 'k', start: 10, end: 20 });
    expect(overlaps[0][1]).toMatchObject({ key: 'k', start: 19.999 });
    expect(maxConcurrencyPerKey(bad)).toBe(2);

    // A long interval swallowing several later ones is caught for each of them.
    const nested: Interval[] = [
      { key: 'n', start: 0, end: 100 },
      { key: 'n', start: 10, end: 20 },
      { key: 'n', start: 30, end: 40 },
    ];
    expect(findOverlaps(nested)).toHaveLength(2);
  });
});

describe(`mutual exclusion across ${PROCESSES} OS processes`, () => {
  it(`keeps a non-atomic read-modify-write counter exact: ${PROCESSES} x ${CALLS} concurrent calls per key`, async () => {
    const names = ['alpha', 'beta', 'gamma'];
    const configs = counterRun(true, names);
    const results = await runWorkers(configs);
    for (const r of results)
      expect({ code: r.code, why: describeResult(r) }).toMatchObject({ code: 0 });
    expect(linesOf(results, 'error')).toEqual([]);

    // Every counter ends exactly at processes x calls.
    const prefix = configs[0].dataPrefix;
    const counters = await redis.mget(...names.map((n) => `${prefix}${n}`));
    expect(counters).toEqual(names.map(() => String(PROCESSES * CALLS)));

    const holds = linesOf(results, 'hold').map((h) => ({ ...h, by: h.pid }));
    expect(holds).toHaveLength(PROCESSES * CALLS * names.length);
    const perKey = byKey(holds);
    expect([...perKey.keys()].sort()).toEqual(names.map((n) => `counter:${n}`));
    for (const list of perKey.values()) {
      expect(list).toHaveLength(PROCESSES * CALLS);
      // Every process really competed for every key.
      expect(new Set(list.map((h) => h.pid)).size).toBe(PROCESSES);
    }

    // The independent checker: no two holds of one key overlapped, in any process.
    const overlaps = findOverlaps(holds);
    expect(describeOverlaps(overlaps)).toBe('');
    expect(overlaps).toHaveLength(0);

    // Different keys ran at the same time; one key never did.
    expect(maxConcurrencyPerKey(holds)).toBe(1);
    expect(maxConcurrency(holds)).toBeGreaterThan(1);
  });

  it('loses updates without the lock (the race the lock prevents is real)', async () => {
    const configs = counterRun(false, ['unlocked']);
    const results = await runWorkers(configs);
    for (const r of results)
      expect({ code: r.code, why: describeResult(r) }).toMatchObject({ code: 0 });
    const value = Number(await redis.get(`${configs[0].dataPrefix}unlocked`));
    expect(value).toBeGreaterThan(0);
    expect(value).toBeLessThan(PROCESSES * CALLS);
    // And the checker sees the overlapping sections.
    expect(findOverlaps(linesOf(results, 'hold')).length).toBeGreaterThan(0);
  });
});

@Injectable()
class SlowService {
  readonly intervals: Interval[] = [];

  @Locked('slow:{id}', { waitTimeout: 20_000 })
  async run(id: string): Promise<number> {
    const start = now();
    await sleep(60);
    const { keys, fence } = LockContext.current()!;
    this.intervals.push({ key: keys[0], start, end: now(), fence, by: id });
    return fence;
  }
}

describe('concurrency in one process', () => {
  let app: INestApplication;
  let svc: SlowService;

  beforeAll(async () => {
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('mx') },
      providers: [SlowService],
    });
    svc = app.get(SlowService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('runs calls on different keys at the same time', async () => {
    svc.intervals.length = 0;
    await Promise.all(Array.from({ length: 8 }, (_, i) => svc.run(`different-${i}`)));
    expect(svc.intervals).toHaveLength(8);
    expect(maxConcurrency(svc.intervals)).toBeGreaterThan(1);
    expect(findOverlaps(svc.intervals)).toEqual([]);
  });

  it('runs calls on one key one at a time', async () => {
    svc.intervals.length = 0;
    const fences = await Promise.all(Array.from({ length: 8 }, () => svc.run('same')));
    expect(svc.intervals).toHaveLength(8);
    expect(maxConcurrency(svc.intervals)).toBe(1);
    expect(findOverlaps(svc.intervals)).toEqual([]);
    expect(new Set(fences).size).toBe(8);
  });
});
