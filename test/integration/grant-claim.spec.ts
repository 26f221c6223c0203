import type { INestApplication } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { LockNotAcquiredError, LockService } from 'nest-locked';
import { findOverlaps, type Interval, now } from '../support/intervals';
import {
  createLockApp,
  lockRedisKey,
  queuedInRedis,
  sleep,
  uniquePrefix,
  until,
} from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import type { RedisServerHandle } from '../support/redis-server';

/**
 * Keys granted across processes (two apps on one node): exclusion and each app's FIFO order
 * hold, sections that end at once leave nothing behind in Redis, and a granted holder that runs
 * past the 1 s claim window keeps its key (the claim renewed it to its lease).
 */
jest.setTimeout(60_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

const keyPrefix = uniquePrefix('claim');
let apps: INestApplication[] = [];

beforeAll(async () => {
  const options = { clients: [server.url], keyPrefix, waitTimeout: 20_000 };
  apps = [await createLockApp({ options }), await createLockApp({ options })];
});
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
});

it('grants between two apps: no overlap, FIFO per app, nothing left, also for holds shorter than the claim', async () => {
  const key = 'granted';
  const intervals: Interval[] = [];
  const entered: number[][] = [[], []];
  const calls: Promise<void>[] = [];
  for (let i = 0; i < 40; i++) {
    const a = i % 2;
    calls.push(
      apps[a].get(LockService).using(key, async () => {
        const start = now();
        entered[a].push(i);
        // Every third section ends at once.
        if (i % 3 !== 0) await sleep(2);
        else await Promise.resolve();
        intervals.push({ key, start, end: now(), by: `${a}.${i}` });
      }),
    );
    await sleep(1); // callers arrive one after another, not in one tick
  }
  await Promise.all(calls);
  expect(intervals).toHaveLength(40);
  expect(findOverlaps(intervals)).toEqual([]);
  // Each app's callers entered in the order they arrived.
  for (const list of entered) expect(list).toEqual([...list].sort((x, y) => x - y));
  const grants = apps.reduce((n, a) => n + a.get(LockService).stats().grants, 0);
  expect(grants).toBeGreaterThan(0);
  // The last release's clean-up lands at once; keys left behind would stay (and fail this).
  const rk = lockRedisKey(keyPrefix, key);
  await until(
    async () => (await redis.exists(rk, `${rk}:wait`, `${rk}:q`, `${rk}:qm`)) === 0,
    'nothing left in Redis',
    1_000,
  );
});

it('a granted holder that runs past the 1 s claim window keeps its key', async () => {
  const key = 'long';
  const [a, b] = apps.map((x) => x.get(LockService));
  const first = await a.acquire(key, { ttl: 3_000 });
  let lost: boolean | undefined;
  const granted = b.using(
    key,
    async ({ signal }) => {
      await sleep(1_500);
      lost = signal.aborted;
    },
    { ttl: 3_000 },
  );
  await queuedInRedis(redis, keyPrefix, key, 1);
  // And b listens for its grant (the release publishes it).
  const bClient = apps[1].get(LockGroupRegistry).get('default') as RedisLockBackend;
  await until(() => bClient.notifier.listening, "b's grant channel subscribed");
  await first.release();
  await sleep(1_200); // past the claim window, inside b's section
  await expect(a.acquire(key, { waitTimeout: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError);
  await granted;
  expect(lost).toBe(false);
});
