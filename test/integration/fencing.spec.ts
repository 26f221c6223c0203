import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockLostError, LockService } from 'nest-locked';
import type { CounterScenario } from '../fixtures/lock-worker';
import { describeOverlaps, findOverlaps } from '../support/intervals';
import { createLockApp, lockRedisKey, uniquePrefix, until } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { describeResult, linesOf, runWorkers } from '../support/workers';

jest.setTimeout(60_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

describe('fencing tokens across processes', () => {
  it('strictly increase in the order the holds happened: 3 processes x 10 holds of one key', async () => {
    const id = randomBytes(4).toString('hex');
    const config = (): CounterScenario => ({
      scenario: 'counter',
      clients: [server.url],
      keyPrefix: `fence:${id}:`,
      dataUrl: server.url,
      dataPrefix: `fence:${id}:data:`,
      timeoutMs: 45_000,
      waitTimeout: 40_000,
      names: ['shared'],
      calls: 10,
      delayMs: 2,
      locked: true,
    });
    const results = await runWorkers([config(), config(), config()]);
    for (const r of results)
      expect({ code: r.code, why: describeResult(r) }).toMatchObject({ code: 0 });
    expect(linesOf(results, 'error')).toEqual([]);

    const holds = linesOf(results, 'hold')
      .map((h) => ({ ...h, by: h.pid }))
      .sort((a, b) => a.start - b.start);
    expect(holds).toHaveLength(30);
    expect(new Set(holds.map((h) => h.pid)).size).toBe(3);
    expect(describeOverlaps(findOverlaps(holds))).toBe('');

    const fences = holds.map((h) => h.fence);
    expect(new Set(fences).size).toBe(30);
    const outOfOrder = fences.flatMap((f, i) =>
      i > 0 && f <= fences[i - 1] ? [[fences[i - 1], f]] : [],
    );
    expect(outOfOrder).toEqual([]);
    expect(fences.every((f) => Number.isInteger(f) && f > 0)).toBe(true);
    expect(await redis.get(`${config().dataPrefix}shared`)).toBe('30');
  });
});

describe('fencing after a lease ran out', () => {
  // Two apps on one server stand for two instances of a service.
  let apps: INestApplication[] = [];
  let locks: LockService;
  let other: LockService;
  const keyPrefix = uniquePrefix('fence');
  /** Until the lease of `key` ran out in Redis (nobody renews it). */
  const expired = (key: string) =>
    until(
      async () => (await redis.exists(lockRedisKey(keyPrefix, key))) === 0,
      `the lease of ${key} ran out`,
      3_000,
    );

  beforeAll(async () => {
    apps = await Promise.all(
      [0, 1].map(() => createLockApp({ options: { clients: [server.url], keyPrefix } })),
    );
    [locks, other] = apps.map((a) => a.get(LockService));
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });

  it('gives the next holder a larger fence, and the stale holder learns it lost the lock', async () => {
    const key = `stale:${randomBytes(4).toString('hex')}`;
    // A holder that stops renewing (no watchdog), as a stalled process would.
    const old = await locks.acquire(key, { ttl: 150, watchdog: false, waitTimeout: 0 });
    await expired(key);
    const next = await other.acquire(key, { waitTimeout: 0 });
    try {
      expect(next.fence).toBeGreaterThan(old.fence);
      // The stale holder cannot extend a lease that is someone else's now.
      await expect(old.extend(1_000)).rejects.toBeInstanceOf(LockLostError);
      // Its release is a no-op: the new holder keeps the key.
      await old.release();
      expect(await locks.isLocked(key)).toBe(true);
    } finally {
      await next.release();
    }
    expect(await locks.isLocked(key)).toBe(false);
  });

  it('does not let a stale hold block the other callers of its own process past its lease', async () => {
    // Forgotten handles (never released, no watchdog): Redis frees the keys after 150 ms, so
    // callers of the same process must get them too, with or without waiting.
    const tryOnce = `stale:${randomBytes(4).toString('hex')}`;
    const forgotten = await locks.acquire(tryOnce, { ttl: 150, watchdog: false, waitTimeout: 0 });
    await expired(tryOnce);
    const next = await locks.acquire(tryOnce, { waitTimeout: 0 });
    expect(next.fence).toBeGreaterThan(forgotten.fence);
    await next.release();

    const waited = `stale:${randomBytes(4).toString('hex')}`;
    const other = await locks.acquire(waited, { ttl: 150, watchdog: false, waitTimeout: 0 });
    const start = performance.now();
    const waiter = await locks.acquire(waited, { waitTimeout: 5_000 });
    // Within the lease plus one poll interval (1 s) and a margin, not at the 5 s deadline.
    expect(performance.now() - start).toBeLessThan(3_000);
    expect(waiter.fence).toBeGreaterThan(other.fence);
    await waiter.release();

    // The late releases of the stale holders change nothing.
    await Promise.all([forgotten.release(), other.release()]);
    expect(await locks.isLocked(tryOnce)).toBe(false);
    const again = await locks.acquire(waited, { waitTimeout: 0 });
    await again.release();
  });
});
