import * as fs from 'node:fs';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { type LockLostEvent, LockLostError, LockService } from 'nest-locked';
import {
  abortedWithin,
  describeOutcome,
  FaultFrame,
  releaseIfHeld,
  settle,
  uid,
} from '../support/faults';
import { lockRedisKey, sleep, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';

/**
 * A lock server with `maxmemory` and an eviction policy (issue: "maxmemory with an eviction
 * policy that evicts a held lock"; item 6). Every `volatile-*` policy can evict a lock key (it
 * has a lease, i.e. an expire), every `allkeys-*` policy any key: only `noeviction` keeps held
 * locks. The holder must learn at its next renewal; startup must warn about such a server.
 */
jest.setTimeout(30_000);

const TTL = 1_500;
const frame = new FaultFrame();
let server: RedisServerHandle;
let raw: Redis;
const keyPrefix = uniquePrefix('evict');

beforeAll(async () => {
  // volatile-ttl evicts the key with the nearest expiry first: a held lock, deterministically.
  server = frame.track(
    await startRedisServer({
      args: ['--maxmemory', '100mb', '--maxmemory-policy', 'volatile-ttl'],
    }),
  );
  raw = frame.raw(server);
});

afterAll(() => frame.stopAll());

describe('startup warns when a lock server can evict keys', () => {
  let warn: jest.SpyInstance;
  const warnings = (): string[] => warn.mock.calls.map((c: unknown[]) => String(c[0]));

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(async () => {
    warn.mockRestore();
    await raw.config('SET', 'maxmemory', '100mb');
    await raw.config('SET', 'maxmemory-policy', 'volatile-ttl');
  });

  async function startupWarnings(maxmemory: string, policy: string): Promise<string[]> {
    await raw.config('SET', 'maxmemory', maxmemory);
    await raw.config('SET', 'maxmemory-policy', policy);
    const app = await frame.app({ clients: [server.url], keyPrefix: uniquePrefix('evict-warn') });
    await app.close();
    return warnings().filter((w) => /maxmemory|evict/i.test(w));
  }

  it.each(['allkeys-lru', 'volatile-ttl', 'volatile-lru'])(
    'maxmemory-policy %s: one warning naming the policy and noeviction',
    async (policy) => {
      const found = await startupWarnings('100mb', policy);
      expect(found).toHaveLength(1);
      expect(found[0]).toContain(policy);
      expect(found[0]).toContain('noeviction');
    },
  );

  it('maxmemory-policy noeviction, or no maxmemory at all: no warning', async () => {
    expect(await startupWarnings('100mb', 'noeviction')).toEqual([]);
    expect(await startupWarnings('0', 'allkeys-lru')).toEqual([]);
  });
});

describe('a held lock evicted under memory pressure', () => {
  it('the holder learns it at its next renewal (signal aborts with LockLostError, `lost` emitted); the next holder fences higher', async () => {
    const app = await frame.app({ clients: [server.url], keyPrefix });
    const locks = app.get(LockService);
    const other = (await frame.app({ clients: [server.url], keyPrefix })).get(LockService);
    const lost: LockLostEvent[] = [];
    locks.on('lost', (e) => lost.push(e));

    const key = `evict:${uid()}`;
    const rk = lockRedisKey(keyPrefix, key);
    const held = await locks.acquire(key, { ttl: TTL });
    const aborted = abortedWithin(held.signal, 10_000);

    // Memory pressure: a limit just above what is used, then plain keys (no expire) until Redis
    // evicts the lock (bounded: at most ~8 MB of filler).
    const used = Number(/used_memory:(\d+)/.exec(await raw.info('memory'))![1]);
    await raw.config('SET', 'maxmemory', String(used + 1024 * 1024));
    let evictedAt: number | undefined;
    const filler = 'x'.repeat(1024);
    try {
      for (let batch = 0; batch < 80 && evictedAt === undefined; batch++) {
        const pipeline = raw.pipeline();
        for (let i = 0; i < 100; i++) pipeline.set(`fill:${keyPrefix}${batch}:${i}`, filler);
        const replies = (await pipeline.exec()) ?? [];
        if (!(await raw.exists(rk))) evictedAt = performance.now();
        // Nothing volatile left to evict: Redis refuses writes (OOM).
        else if (replies.some(([err]) => err)) break;
      }
    } finally {
      await raw.config('SET', 'maxmemory', '100mb');
    }
    expect(evictedAt).toBeDefined();
    expect(Number(/evicted_keys:(\d+)/.exec(await raw.info('stats'))![1])).toBeGreaterThan(0);

    const abortedAt = await aborted;
    expect(abortedAt).toBeDefined();
    // Its next renewal (every ttl/3) finds the key gone; a margin for a loaded machine.
    expect(abortedAt! - evictedAt!).toBeLessThanOrEqual(TTL / 3 + 600);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    expect(held.signal.reason).toMatchObject({ reason: 'lost' });
    expect(lost.map((e) => e.keys)).toEqual([[key]]);
    await held.release();

    // The key was free for anyone: fences still increase across the eviction.
    const next = await settle(() => other.acquire(key, { waitTimeout: 0 }));
    await releaseIfHeld(next);
    expect(describeOutcome(next)).toBe('acquired');
    expect(next.value!.fence).toBeGreaterThan(held.fence);
  });
});

describe('an evicted fence counter', () => {
  it('the next fence of the key is larger than every fence handed out before (item 1)', async () => {
    const locks = (await frame.app({ clients: [server.url], keyPrefix })).get(LockService);
    const key = `counter:${uid()}`;
    const fenceKey = `${lockRedisKey(keyPrefix, key)}:fence`;
    const before: number[] = [];
    for (let i = 0; i < 3; i++) before.push(await locks.using(key, ({ fence }) => fence));
    expect(await raw.exists(fenceKey)).toBe(1);

    // allkeys-lru evicts the least recently used keys: the counter, idle for over a second (the
    // LRU clock ticks once a second), goes before the fresh filler keys.
    await sleep(1_200); // the counter idle past one LRU clock tick: the scenario
    const used = Number(/used_memory:(\d+)/.exec(await raw.info('memory'))![1]);
    await raw.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await raw.config('SET', 'maxmemory-samples', '10');
    await raw.config('SET', 'maxmemory', String(used + 1024 * 1024));
    let evicted = false;
    const filler = 'y'.repeat(1024);
    try {
      for (let batch = 0; batch < 100 && !evicted; batch++) {
        const pipeline = raw.pipeline();
        for (let i = 0; i < 100; i++) pipeline.set(`fill2:${keyPrefix}${batch}:${i}`, filler);
        await pipeline.exec();
        evicted = (await raw.exists(fenceKey)) === 0;
      }
    } finally {
      await raw.config('SET', 'maxmemory', '100mb');
      await raw.config('SET', 'maxmemory-policy', 'volatile-ttl');
      await raw.config('SET', 'maxmemory-samples', '5');
    }
    expect(evicted).toBe(true);

    const after = await locks.using(key, ({ fence }) => fence);
    expect(after).toBeGreaterThan(Math.max(...before));
  });
});

describe('the README', () => {
  it('says which maxmemory policies keep held locks (noeviction) and that volatile-* ones evict them', () => {
    const readme = fs.readFileSync(path.join(__dirname, '../../README.md'), 'utf8');
    const paragraphs = readme.split(/\n\s*\n/).filter((p) => /maxmemory/.test(p));
    expect(paragraphs.some((p) => /maxmemory-policy noeviction/.test(p))).toBe(true);
    expect(paragraphs.some((p) => /volatile-/.test(p) && /evict/.test(p))).toBe(true);
  });
});
